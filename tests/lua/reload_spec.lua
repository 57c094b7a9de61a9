-- Hot code reload: smarm.reload publishes a new version of a module and every actor that
-- has it loaded takes it at its next safe point; gen_server and gen_statem convert their
-- state with code_change; supervisors restart children on the newest version.
local smarm = require "smarm"
local gen_server = require "smarm.gen_server"
local gen_statem = require "smarm.gen_statem"
local supervisor = require "smarm.supervisor"
local hot = require "support.hot"

local dir = hot.dir()
hot.use(dir)

-- a module name no other test uses (the module cache is the runtime's)
local serial = 0
local function fresh(prefix)
   serial = serial + 1
   return string.format("%s_%d_%d", prefix, smarm.self() % 100000, serial)
end

-- waits (bounded) until name is registered to a pid other than not_pid
local function await_name(name, not_pid)
   for _ = 1, 1000 do
      local p = smarm.whereis(name)
      if p and p ~= not_pid then return p end
      smarm.sleep(0.005)
   end
   error("nobody registered " .. name)
end

-- a server of module mod (in dir) under name, started in its own actor
local function start_server(mod, args)
   local name = fresh("srv")
   smarm.spawn(function(d, m, a, n)
      require("support.hot").serve(d, m, a, { name = n })
   end, dir, mod, args, name)
   return await_name(name), name
end

local counter_src = [[
local M = {}
function M.tag() return "%s" end
function M.init(args) return { n = args.n, sum = 0, next = 1, ok = true, conv = 0 } end
function M.handle_cast(i, s)
   if i ~= s.next then s.ok = false end
   s.next = i + 1
   s.sum = s.sum + i
   s.n = s.n + %d
   return "noreply", s
end
function M.handle_call(req, _, s)
   if req == "get" then return "reply", { tag = M.tag(), n = s.n, sum = s.sum, ok = s.ok,
      conv = s.conv, next = s.next }, s end
   if req == "crash" then error("asked to crash") end
end
function M.code_change(old_vsn, s, extra)
   %s
   s.conv = s.conv + 1
   s.old_vsn = old_vsn
   return s
end
return M
]]

local function counter(tag, step, change)
   return string.format(counter_src, tag, step, change or "")
end

describe("smarm.reload", function()
   teardown(function() os.execute("rm -rf " .. dir) end)

   it("switches a plain actor's loop to the new code, keeping the module's values", function()
      local mod = fresh("loop")
      hot.write(dir, mod, [[
local M = { calls = 0 }
function M.handle(x) M.calls = M.calls + 1; return "old " .. x end
return M
]])
      local me = smarm.self()
      local p = smarm.spawn(function(d, m, parent)
         local sm = require "smarm"
         require("support.hot").use(d)
         local M = require(m)
         sm.on_reload(function(name, v) sm.send(parent, { hook = name, v = v }) end)
         while true do
            local x = sm.recv()
            if x == "stop" then return end
            sm.send(parent, { M.handle(x), M.calls, M.added })
         end
      end, dir, mod, me)
      smarm.send(p, 1)
      assert.are.same({ "old 1", 1 }, smarm.recv(5))
      assert.are.equal(0, smarm.code_version(mod))
      hot.write(dir, mod, [[
local M = { calls = 100, added = "yes" }
function M.handle(x) M.calls = M.calls + 1; return "new " .. x end
return M
]])
      assert.are.equal(1, smarm.reload(mod))
      assert.are.equal(1, smarm.code_version(mod))
      smarm.send(p, 2)
      -- the hook runs when the actor takes the version (its recv returning), before it
      -- handles the message: calls is the kept value, added the new field
      assert.are.same({ hook = mod, v = 1 }, smarm.recv(5))
      assert.are.same({ "new 2", 2, "yes" }, smarm.recv(5))
      smarm.send(p, "stop")
   end)

   it("refuses a syntax error naming file and line, and the old code goes on", function()
      local mod = fresh("bad")
      hot.write(dir, mod, "return { n = 0, v = function() return 'good' end }\n")
      -- a plain actor without the Lua half of reload loaded (the runtime's own take)
      local p = smarm.spawn(function(d, m, parent)
         local sm = require "smarm"
         package.path = d .. "/?.lua;" .. package.path
         local M = require(m)
         while sm.recv() ~= "stop" do
            M.n = M.n + 1
            sm.send(parent, { M.v(), M.n, M.added, package.loaded["smarm.reload"] == nil })
         end
      end, dir, mod, smarm.self())
      smarm.send(p, "go")
      assert.are.same({ "good", 1, nil, true }, smarm.recv(5))
      hot.write(dir, mod, "local x = 1\nreturn { v = function() return 'bad' end\n")
      local v, err = smarm.reload(mod)
      assert.is_nil(v)
      assert.matches(mod .. "%.lua:3: ", err)
      assert.are.equal(0, smarm.code_version(mod))
      smarm.send(p, "go")
      assert.are.same({ "good", 2, nil, true }, smarm.recv(5))
      -- an actor loading it later gets the last accepted version, not the broken file
      local q = smarm.spawn(function(d, m, parent)
         require("support.hot").use(d)
         require("smarm").send(parent, require(m).v())
      end, dir, mod, smarm.self())
      assert.truthy(q)
      assert.are.equal("good", smarm.recv(5))
      -- a good version: the function is replaced, n kept, the new field added
      hot.write(dir, mod, "local M = { n = 100, added = 'yes' }\n"
         .. "function M.v() return 'better ' .. M.n end\nreturn M\n")
      assert.are.equal(1, smarm.reload(mod))
      smarm.send(p, "go")
      assert.are.same({ "better 3", 3, "yes", true }, smarm.recv(5))
      smarm.send(p, "stop")
   end)

   it("names what it cannot reload", function()
      assert.are.same({ nil, "module no_such_module_here is not loaded" },
         { smarm.reload("no_such_module_here") })
      local _, err = smarm.reload("smarm.gen_server")
      assert.matches("part of smarm", err)
      assert.has_error(function() smarm.reload({}) end)
      assert.has_error(function() smarm.on_reload("x") end)
   end)

   it("keeps 100,000 messages to a gen_server exact across 50 reloads", function()
      local mod = fresh("count")
      hot.write(dir, mod, counter("v0", 1))
      local srv, name = start_server(mod, { n = 0 })
      local producer = smarm.spawn(function(s)
         local sm = require "smarm"
         local gs = require "smarm.gen_server"
         local i = 0
         while true do
            local batch = sm.recv()
            if batch == "stop" then return end
            for _ = 1, batch do
               i = i + 1
               gs.cast(s, i)
            end
         end
      end, srv)
      for r = 1, 50 do
         hot.write(dir, mod, counter("v" .. r, 1))
         assert.are.equal(r, smarm.reload(mod))
         smarm.send(producer, 2000)
         smarm.sleep(0.001)
      end
      smarm.send(producer, "stop")
      local st
      for _ = 1, 2000 do
         st = gen_server.call(name, "get", 10)
         if st.next == 100001 then break end
         smarm.sleep(0.005)
      end
      assert.are.equal(100001, st.next)
      assert.are.equal(100000 * 100001 / 2, st.sum)
      assert.are.equal(100000, st.n)
      assert.is_true(st.ok)
      assert.are.equal("v50", st.tag)
      -- one conversion per version taken: several published before a safe point are taken once
      assert.is_true(st.conv >= 1 and st.conv <= 50)
      gen_server.stop(name, "normal", 5)
   end)

   it("loads its Lua half into a server only once the server's module is reloaded", function()
      local mod = fresh("lazy")
      local src = [[
local M = {}
function M.init() return 0 end
function M.handle_call(_, _, s)
   return "reply", { half = debug.getregistry()._LOADED["smarm.reload"] ~= nil, s = s }, s
end
function M.code_change(_, s) return s + 1 end
return M
]]
      hot.write(dir, mod, src)
      local _, name = start_server(mod, nil)
      assert.are.same({ half = false, s = 0 }, gen_server.call(name, "x", 5))
      hot.write(dir, mod, src .. "-- version 1\n")
      assert.are.equal(1, smarm.reload(mod))
      -- taken at the server's next safe point, with code_change, as when it was loaded
      assert.are.same({ half = true, s = 1 }, gen_server.call(name, "x", 5))
      gen_server.stop(name, "normal", 5)
   end)

   it("keeps the old code and state when code_change raises", function()
      local mod = fresh("cc")
      hot.write(dir, mod, counter("v0", 1))
      local _, name = start_server(mod, { n = 0 })
      gen_server.cast(name, 1)
      hot.write(dir, mod, counter("v1", 100, "error('cannot convert')"))
      assert.are.equal(1, smarm.reload(mod))
      gen_server.cast(name, 2)
      local st = gen_server.call(name, "get", 5)
      -- the cast after the failed change ran the old handle_cast (+1), and the tag is old
      assert.are.same({ tag = "v0", n = 2, sum = 3, ok = true, conv = 0, next = 3 }, st)
      -- a later good version converts
      hot.write(dir, mod, counter("v2", 10))
      assert.are.equal(2, smarm.reload(mod))
      gen_server.cast(name, 3)
      st = gen_server.call(name, "get", 5)
      assert.are.same({ tag = "v2", n = 12, sum = 6, ok = true, conv = 1, next = 4 }, st)
      gen_server.stop(name, "normal", 5)
   end)

   it("keeps a server's state as it is without code_change; a failing hook harms nothing",
      function()
         local mod = fresh("nocc")
         local src = [[
local M = {}
function M.init() return { hits = 0 } end
function M.handle_cast(_, s) s.hits = s.hits + 1; return "noreply", s end
function M.handle_call(_, _, s) return "reply", { "%s", s.hits }, s end
return M
]]
         hot.write(dir, mod, string.format(src, "v0"))
         local _, name = start_server(mod)
         gen_server.cast(name, "hit")
         assert.are.same({ "v0", 1 }, gen_server.call(name, "get", 5))
         -- a plain actor whose hook raises still takes the version and goes on
         local watcher = smarm.spawn(function(d, m, parent)
            local sm = require "smarm"
            require("support.hot").use(d)
            local M = require(m)
            sm.on_reload(function() error("hook trouble") end)
            sm.on_reload(function(n, v) sm.send(parent, { n, v }) end)
            while sm.recv() ~= "stop" do
               sm.send(parent, { M.handle_call(nil, nil, { hits = 0 }) })
            end
         end, dir, mod, smarm.self())
         smarm.send(watcher, "go")
         assert.are.same({ "reply", { "v0", 0 }, { hits = 0 } }, smarm.recv(5))
         hot.write(dir, mod, string.format(src, "v1"))
         assert.are.equal(1, smarm.reload(mod))
         smarm.send(watcher, "go")
         assert.are.same({ mod, 1 }, smarm.recv(5))
         assert.are.same({ "reply", { "v1", 0 }, { hits = 0 } }, smarm.recv(5))
         assert.are.same({ "v1", 1 }, gen_server.call(name, "get", 5))
         smarm.send(watcher, "stop")
         gen_server.stop(name, "normal", 5)
      end)

   it("runs gen_statem's code_change with state and data", function()
      local mod = fresh("sm")
      local src = [[
local M = { callback_mode = "handle_event_function" }
function M.init() return "idle", { hits = 0 } end
function M.handle_event(etype, content, state, data, from)
   if etype == "call" then
      return "keep_state", data, { { "reply", from, { state, data.hits, "%s" } } }
   end
   data.hits = data.hits + 1
   return "keep_state", data
end
function M.code_change(old_vsn, state, data, extra)
   data.hits = data.hits + 1000
   return state .. "+" .. old_vsn, data
end
return M
]]
      hot.write(dir, mod, string.format(src, "v0"))
      local name = fresh("sm")
      smarm.spawn(function(d, m, n)
         require("support.hot").statem(d, m, nil, { name = n })
      end, dir, mod, name)
      await_name(name)
      gen_statem.cast(name, "hit")
      assert.are.same({ "idle", 1, "v0" }, gen_statem.call(name, "get", 5))
      hot.write(dir, mod, string.format(src, "v1"))
      assert.are.equal(1, smarm.reload(mod))
      gen_statem.cast(name, "hit")
      assert.are.same({ "idle+0", 1002, "v1" }, gen_statem.call(name, "get", 5))
      gen_statem.stop(name, "normal", 5)
   end)

   it("has a supervisor restart a child on the new version", function()
      local mod = fresh("sup")
      hot.write(dir, mod, counter("v0", 1))
      local name = fresh("child")
      local sup = assert(supervisor.start_link({ strategy = "one_for_one", intensity = 5,
         period = 5, children = { { id = "c", start = { "support.hot", "serve", dir, mod,
            { n = 7 }, { name = name } } } } }))
      local old = await_name(name)
      assert.are.equal("v0", gen_server.call(name, "get", 5).tag)
      hot.write(dir, mod, counter("v1", 1))
      assert.are.equal(1, smarm.reload(mod))
      -- the running child converts; a restarted one starts on v1 with a fresh state
      assert.are.same({ "v1", 1 }, { gen_server.call(name, "get", 5).tag,
         gen_server.call(name, "get", 5).conv })
      assert.are.same({ nil, "server_down" }, { gen_server.call(name, "crash", 5) })
      await_name(name, old)
      local st = gen_server.call(name, "get", 5)
      assert.are.same({ "v1", 0, 7 }, { st.tag, st.conv, st.n })
      local mon = smarm.monitor(sup)
      smarm.unlink(sup)
      smarm.shutdown(sup)
      assert.is_truthy(mon:recv(5))
   end)
end)
