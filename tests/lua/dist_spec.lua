-- Distribution values without a network: atoms, tuples, remote pids and the term codec
-- (the Erlang external term format). tests/cli/dist_test.sh runs real nodes.
local smarm = require "smarm"
local raw = require "smarm.dist.raw"
local dist = require "smarm.dist"
local A, T = smarm.atom, smarm.tuple

local function round_trip(v)
   local back, next = raw.decode(raw.encode(v))
   assert(next, back)
   return back
end

describe("distribution values", function()
   it("atoms are unique values, distinct from strings, and survive messages", function()
      local ok = A("ok")
      assert.are.equal(ok, A("ok"))
      assert.are_not.equal(ok, A("error"))
      assert.are_not.equal(ok, "ok")
      assert.is_true(smarm.is_atom(ok))
      assert.is_false(smarm.is_atom("ok"))
      assert.are.equal("ok", smarm.atom_name(ok))
      local keys = { [ok] = 1 }
      smarm.send(smarm.self(), { ok, { [ok] = "v" } })
      local m = smarm.recv(1)
      assert.are.equal(ok, m[1])
      assert.are.equal("v", m[2][ok])
      assert.are.equal(1, keys[m[1]])
      assert.has_error(function() A(string.rep("x", 256)) end)
   end)

   it("tuples are tables that know they are tuples, also after a message", function()
      local t = T(A("ok"), 1, "two")
      assert.is_true(smarm.is_tuple(t))
      assert.is_false(smarm.is_tuple({ 1, 2 }))
      assert.are.equal(3, #t)
      smarm.send(smarm.self(), t)
      local m = smarm.recv(1)
      assert.is_true(smarm.is_tuple(m))
      assert.are.equal("two", m[3])
      assert.is_true(smarm.is_tuple(T()))
   end)

   it("map to Erlang terms and back", function()
      assert.are.equal(42, round_trip(42))
      assert.are.equal(-7, round_trip(-7))
      assert.are.equal(1.5, round_trip(1.5))
      assert.are.equal("bytes\0in", round_trip("bytes\0in"))
      assert.are.equal(true, round_trip(true))
      assert.are.equal(nil, round_trip(nil))
      assert.are.equal(A("x"), round_trip(A("x")))
      assert.are.same({ 1, 2, 3 }, round_trip({ 1, 2, 3 }))
      assert.are.same({}, round_trip({}))
      assert.are.same({ a = 1, [2.5] = "x" }, round_trip({ a = 1, [2.5] = "x" }))
      local t = round_trip(T(A("k"), { T(1, 2) }))
      assert.is_true(smarm.is_tuple(t) and smarm.is_tuple(t[2][1]))
      -- exact integers up to 2^53 are numbers, beyond they are int64 cdata both ways
      assert.are.equal(2 ^ 53, round_trip(2 ^ 53))
      assert.are.equal("9007199254740993LL", tostring(round_trip(9007199254740993LL)))
      assert.are.equal("18446744073709551615ULL", tostring(round_trip(18446744073709551615ULL)))
      assert.are.equal("-9223372036854775807LL", tostring(round_trip(-9223372036854775807LL)))
   end)

   it("read what erl writes (term_to_binary output)", function()
      -- term_to_binary({ok, 1, <<"bin">>, [1,2,3], #{x => 1.5}, true, 1 bsl 60})
      local bytes = string.char(131, 104, 7, 100, 0, 2, 111, 107, 97, 1, 109, 0, 0, 0, 3, 98,
         105, 110, 107, 0, 3, 1, 2, 3, 116, 0, 0, 0, 1, 100, 0, 1, 120, 70, 63, 248, 0, 0, 0, 0,
         0, 0, 100, 0, 4, 116, 114, 117, 101, 110, 8, 0, 0, 0, 0, 0, 0, 0, 0, 16)
      local v, next = raw.decode(bytes)
      assert.are.equal(#bytes + 1, next)
      assert.is_true(smarm.is_tuple(v))
      assert.are.equal(A("ok"), v[1])
      assert.are.equal("bin", v[3])
      assert.are.same({ 1, 2, 3 }, v[4]) -- a STRING_EXT: the list of bytes
      assert.are.equal(1.5, v[5][A("x")])
      assert.are.equal(true, v[6])
      assert.are.equal("1152921504606846976LL", tostring(v[7]))
   end)

   it("keep what Lua cannot hold opaque, to send back unchanged", function()
      -- a reference (NEWER_REFERENCE_EXT) and an improper list [a | b]
      local ref = string.char(131, 90, 0, 1, 100, 0, 3, 97, 64, 98, 0, 0, 0, 1, 0, 0, 0, 7)
      local v = raw.decode(ref)
      assert.are.equal("table", type(v))
      assert.are.equal(ref, raw.encode(v))
      local improper = string.char(131, 108, 0, 0, 0, 1, 100, 0, 1, 97, 100, 0, 1, 98)
      assert.are.equal(improper, raw.encode((raw.decode(improper))))
   end)

   it("say clearly what they cannot carry", function()
      local _, err = raw.decode(string.char(131, 77, 0, 0, 0, 1, 3, 255)) -- a bitstring
      assert.matches("bitstring", err)
      _, err = raw.decode("not a term")
      assert.matches("131", err)
      assert.has_error(function() raw.encode({ f = print }) end,
         "dist: cannot send a function to another node (argument 1)")
      local cyc = {}
      cyc[1] = cyc
      assert.has_error(function() raw.encode(cyc) end)
   end)

   it("remote pids are values: ==, table keys, messages, pid_tostring", function()
      local p = raw.pid("other@host", 42, 3, 7)
      local q = raw.decode(raw.encode(p))
      assert.are.equal(p, q)
      assert.are.equal("userdata", type(p))
      local keys = { [p] = "here" }
      smarm.send(smarm.self(), { p })
      local m = smarm.recv(1)
      assert.are.equal("here", keys[m[1]])
      assert.matches("^<%d+%.42%.3>$", smarm.pid_tostring(p))
      assert.are.equal(smarm.pid_tostring(p), smarm.pid_tostring(q))
   end)

   it("on a node that is not alive: nonode@nohost, no peers, sends say so", function()
      assert.are.equal("nonode@nohost", smarm.node())
      assert.are.same({}, smarm.nodes())
      local p = raw.pid("other@host", 1, 1, 1)
      assert.are.same({ nil, "not_alive" }, { smarm.send(p, "x") })
      assert.are.same({ nil, "not_alive" }, { smarm.send({ "name", "other@host" }, "x") })
      assert.are.same({ nil, "not_alive" }, { smarm.connect("other@host") })
      assert.has_error(function() smarm.connect("nohost") end)
      assert.has_error(function() dist.export(smarm.self()) end)
      -- unexport leaves what is not a mark of this node's pid as it is
      assert.are.equal(smarm.self(), dist.unexport(smarm.self()))
      assert.are.equal(p, dist.unexport(p))
      assert.are.equal("x", dist.unexport("x"))
      local gen_server = require "smarm.gen_server"
      assert.are.same({ nil, "not_alive" }, { gen_server.call({ "x", "other@host" }, 1) })
   end)
end)

describe("an int64 in a new actor's arguments", function()
   it("keeps the FFI's finalizer table alive until the actor's state closes", function()
      -- the state decodes the cdata before its package library is open; a GC then must
      -- not free what lua_close reads
      for _ = 1, 20 do
         local _, mon = smarm.spawn_monitor(function(x)
            local t = {}
            for i = 1, 2000 do t[i] = { i } end
            assert(#t == 2000)
            collectgarbage()
            collectgarbage()
            assert(tostring(x) == "1152921504606846976LL")
         end, 1152921504606846976LL)
         assert.are.equal("normal", mon:recv(10).reason)
      end
   end)
end)

describe("a proxy's notices", function()
   local function ends_as(rp, reason)
      require("smarm.dist.raw").set_alias(rp)
      require("smarm").exit(reason)
   end

   it("name the remote pid it stands for: down notices and links' exit signals", function()
      local p = raw.pid("other@host", 5, 1, 1)
      local _, mon = smarm.spawn_monitor(ends_as, p, "bye")
      local d = mon:recv(5)
      assert.are.equal(p, d.pid)
      assert.are.equal("bye", d.reason)
      local trap = smarm.trap_exit(true)
      smarm.spawn_link(ends_as, p, "boom")
      local s = trap:recv(5)
      assert.are.equal(p, s.from)
      assert.are.equal("boom", s.reason)
      smarm.trap_exit(false)
   end)

   it("name it in smarm.exit(pid, reason)'s signal", function()
      local p = raw.pid("other@host", 6, 1, 1)
      local trap = smarm.trap_exit(true)
      smarm.spawn(function(rp, to)
         require("smarm.dist.raw").set_alias(rp)
         require("smarm").exit(to, "stop it")
      end, p, smarm.self())
      local s = trap:recv(5)
      assert.are.equal(p, s.from)
      assert.are.equal("stop it", s.reason)
      smarm.trap_exit(false)
   end)

   it("say noconnection from the remote pid when its node cannot be reached", function()
      local p = raw.pid("other@host", 7, 1, 1)
      local d = smarm.monitor(p):recv(5)
      assert.are.equal(p, d.pid)
      assert.are.equal("noconnection", d.reason)
      local trap = smarm.trap_exit(true)
      smarm.link(p)
      local s = trap:recv(5)
      assert.are.equal(p, s.from)
      assert.are.equal("noconnection", s.reason)
      smarm.trap_exit(false)
   end)

   it("take only a pid, or a name and a node, as what they name", function()
      assert.has_error(function() raw.set_alias(A("x")) end,
         "dist: set_alias: a remote pid or a name and a node expected, got userdata")
      assert.has_error(function() raw.set_alias(5) end)
      assert.has_error(function() raw.set_alias("name") end)
   end)
end)

describe("a monitor of {name, node}", function()
   local function is_name(v, name, node)
      return smarm.is_tuple(v) and #v == 2 and v[1] == name and v[2] == node
   end

   it("names {name, node} in its noconnection notice", function()
      local mon = smarm.monitor({ "kv", "other@host" })
      local d = mon:recv(5)
      assert.is_true(is_name(d.pid, "kv", "other@host"))
      assert.are.equal("noconnection", d.reason)
      assert.are.equal(mon.ref, d.ref)
      -- an atom name and an atom node name the same
      d = smarm.monitor(T(A("kv"), A("other@host"))):recv(5)
      assert.is_true(is_name(d.pid, "kv", "other@host"))
   end)

   it("of this node: the registered actor's reason, named {name, node}", function()
      local w = smarm.spawn(function()
         local s = require "smarm"
         s.register("dist_spec_w")
         s.recv(5)
         s.exit("bye")
      end)
      while not smarm.whereis("dist_spec_w") do smarm.sleep(0.01) end
      local mon = smarm.monitor({ "dist_spec_w", smarm.node() })
      smarm.send(w, "go")
      local d = mon:recv(5)
      assert.is_true(is_name(d.pid, "dist_spec_w", smarm.node()))
      assert.are.equal("bye", d.reason)
   end)

   it("of a name nobody holds: noproc at once", function()
      local d = smarm.monitor({ "dist_spec_nobody", smarm.node() }):recv(5)
      assert.is_true(is_name(d.pid, "dist_spec_nobody", smarm.node()))
      assert.are.equal("noproc", d.reason)
   end)

   it("is dropped by demonitor", function()
      local w = smarm.spawn(function()
         local s = require "smarm"
         s.register("dist_spec_d")
         s.recv(5)
      end)
      while not smarm.whereis("dist_spec_d") do smarm.sleep(0.01) end
      local actors = #smarm.snapshot()
      local mon = smarm.monitor({ "dist_spec_d", smarm.node() })
      assert.is_true(smarm.demonitor(mon))
      -- the stand-in that watched the name goes too
      local deadline = smarm.now() + 5
      while #smarm.snapshot() > actors and smarm.now() < deadline do smarm.sleep(0.01) end
      assert.are.equal(actors, #smarm.snapshot())
      smarm.send(w, "go")
      assert.are.same({ nil, "closed" }, { mon:recv(1) })
   end)

   it("refuses a name that is not a string or an atom", function()
      assert.has_error(function() smarm.monitor({ 5, "other@host" }) end,
         "smarm.monitor: {name, node} with a string or atom name expected, got a number name")
   end)
end)
