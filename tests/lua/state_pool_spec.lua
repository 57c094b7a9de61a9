-- The state pool: an actor whose body returned leaves its state, reset, for a later spawn.
-- A recycled state must look new to Lua code however the last actor left it, and a state
-- the reset could not make new (FFI types, finalizers, traces, a kill in the middle of its
-- code) is closed instead.
-- The bodies keep values they never read:
-- luacheck: ignore 241

-- Dirties every part of its state Lua code can reach, then returns (so it is recycled).
local function dirty(parent)
   local s = require "smarm"
   rawset(_G, "pool_dirt", 1)
   rawset(_G, "print", nil)
   rawset(string, "pool_dirt", 1)
   rawset(math, "floor", nil)
   rawset(table, "concat", nil)
   package.loaded.pool_dirt = {}
   package.preload.pool_dirt = function() end
   package.path, package.cpath = "dirt", "dirt"
   debug.getregistry().pool_dirt = true
   getmetatable("").pool_dirt = 1
   getmetatable("").__index = { len = function() return "dirt" end }
   debug.setmetatable(0, { __index = { dirt = 1 } })
   debug.setmetatable(true, { __index = { dirt = 1 } })
   debug.setmetatable(nil, { __index = { dirt = 1 } })
   debug.setmetatable(print or type, { __index = { dirt = 1 } })
   debug.setmetatable(coroutine.create(type), { __index = { dirt = 1 } })
   math.randomseed(42)
   local _ = math.random()
   -- a suspended coroutine holding an open upvalue, kept in the registry
   local co = coroutine.create(function()
      local x = 1
      coroutine.yield(function() x = x + 1 end)
   end)
   coroutine.resume(co)
   debug.getregistry().pool_co = co
   collectgarbage("setpause", 150)
   collectgarbage("setstepmul", 300)
   collectgarbage("stop")
   -- JIT off, other parameters: nothing compiles meanwhile, so the state stays poolable
   jit.off()
   jit.opt.start("hotloop=1", "-fold")
   setmetatable(_G, { __index = function() return "dirt" end })
   s.send(parent, "dirty")
   -- last: a line hook still set when the body returns
   debug.sethook(function() end, "l")
end

-- What a state shows Lua code, sent to parent as {tag, r}; then waits for "bye" (so the
-- parent can read its smarm.info while it lives).
local function observe(parent, tag)
   local s = require "smarm"
   local r = {}
   local function keys(t)
      local out = {}
      for k, v in pairs(t) do out[#out + 1] = tostring(k) .. ":" .. type(v) end
      table.sort(out)
      return table.concat(out, " ")
   end
   -- the registry without the runtime's own entries (light userdata keys) and the tables the
   -- libraries make as they open (a recycled state may have opened some before its actor)
   local reg = {}
   for k, v in pairs(debug.getregistry()) do
      if type(k) ~= "userdata" and k ~= "_LOADED" and k ~= "_PRELOAD" then reg[k] = v end
   end
   r.registry = keys(reg)
   r.globals = keys(_G)
   for _, lib in ipairs({ "string", "table", "math", "os", "io", "debug", "coroutine", "bit",
                          "jit", "package" }) do
      r[lib] = keys(_G[lib])
   end
   r.loaded = keys(package.loaded)
   r.preload = keys(package.preload)
   r.path, r.cpath = package.path, package.cpath
   r.gmt = keys(getmetatable(_G) or {})
   r.strmt = keys(getmetatable(""))
   r.strmt_is_string = getmetatable("").__index == string
   local basemt = {}
   for _, v in ipairs({ 0, true, print, coroutine.create(type) }) do
      basemt[#basemt + 1] = type(v) .. ":" .. type(debug.getmetatable(v))
   end
   basemt[#basemt + 1] = "nil:" .. type(debug.getmetatable(nil))
   r.basemt = table.concat(basemt, " ")
   local hook = { debug.gethook() }
   for i = 1, 3 do hook[i] = tostring(hook[i]) end
   r.hook = table.concat(hook, " ")
   r.pause = collectgarbage("setpause", 200)
   r.stepmul = collectgarbage("setstepmul", 200)
   local rnd = {}
   for i = 1, 4 do rnd[i] = math.random(1e9) end
   r.random = table.concat(rnd, " ")
   local status = { jit.status() }
   for i = 1, #status do status[i] = tostring(status[i]) end
   r.jit = table.concat(status, " ")
   -- a stopped collector does not free: count garbage made and dropped
   local before = collectgarbage("count")
   local keep = {}
   for i = 1, 2e4 do keep[i % 8] = { i, i, i } end
   r.collects = collectgarbage("count") - before < 500
   -- last: loading the FFI makes this state unpoolable
   local ffi = require "ffi"
   r.cdef = pcall(ffi.typeof, "struct pool_dirt")
   s.send(parent, { tag = tag, r = r })
   s.recv()
end

-- Checks that its state shows none of what check_then_dirty does below (a list of what it
-- found, sent to parent with the first random numbers), then does all of it without the
-- debug library, to the libraries a pooled state keeps (the base library, string, table,
-- math, os, bit), the string metatable, the globals' metatable and the smarm table, and
-- returns (so that its state is recycled, its libraries written back).
-- luacheck: push ignore 121 122 142 143
local function check_then_dirty(parent)
   local s = require "smarm"
   local bad = {}
   local function expect(ok, what) if not ok then bad[#bad + 1] = what end end
   expect(rawget(_G, "pool_dirt") == nil, "_G.pool_dirt")
   expect(type(print) == "function" and type(1) == "number", "print/type")
   expect(_G._G == _G and _G.pool_undefined == nil, "_G")
   expect(string.pool_dirt == nil and string.pool_undefined == nil, "string")
   expect(getmetatable(string) == nil, "string's metatable")
   expect(type(string.format) == "function" and string.rep("a", 2) == "aa", "string functions")
   expect(string.len("abc") == 3 and ("abc"):len() == 3, "string.len")
   expect(getfenv(string.len) == _G and getfenv(table.remove) == _G, "environments")
   expect(getmetatable("").__index == string and getmetatable("").pool_dirt == nil, "string mt")
   expect(type(table.concat) == "function" and table.pool_dirt == nil, "table")
   local t = {}
   table.insert(t, 1)
   expect(t[1] == 1, "table.insert")
   expect(type(math.floor) == "function" and math.pi == 3.141592653589793, "math")
   expect(type(os.time) == "function" and type(bit.band) == "function", "os/bit")
   expect(coroutine.pool_dirt == nil and type(coroutine.wrap) == "function", "coroutine")
   expect(package.loaded.pool_dirt == nil and package.loaded.string == string, "loaded")
   expect(s.pool_dirt == nil and type(s.send) == "function", "smarm")
   expect(collectgarbage("setpause", 200) == 200, "gc pause")
   expect(getfenv(1) == _G and rawget(_G, "pool_body_env") == nil, "the body's environment")
   local rnd = {}
   for i = 1, 4 do rnd[i] = math.random(1e9) end
   s.send(parent, { bad = bad, random = rnd })
   -- now all of it
   local G = _G
   rawset(G, "pool_dirt", 1)
   print = nil
   _G._G = nil
   string.pool_dirt = 1
   string.format = nil
   string.rep = function() return "dirt" end
   string.len = function() return "dirt" end
   setfenv(table.remove, { pool_dirt = 1 })
   getmetatable("").pool_dirt = 1
   getmetatable("").__index = { len = function() return "dirt" end }
   setmetatable(string, { __index = function() return "dirt" end })
   table.concat = nil
   table.pool_dirt = {}
   table.insert = function() end
   math.floor = nil
   math.pi = 3
   math.randomseed(42)
   local _ = math.random()
   os.time = nil
   bit.band = nil
   coroutine.pool_dirt = 1
   coroutine.wrap = nil
   package.loaded.pool_dirt = {}
   package.loaded.string = nil
   collectgarbage("setpause", 150)
   s.pool_dirt = 1
   s.send = nil
   setmetatable(G, { __index = function() return "dirt" end })
   rawset(G, "type", "dirt")
   -- last: the body's own environment (the next body may be this very closure)
   setfenv(1, { pool_body_env = 1 })
end
-- luacheck: pop

local smarm = require "smarm" -- below the bodies, so none of them can capture it
local stats = require "support.stats"
local runtime_stats = stats.runtime

-- The pooled count as the pool's own actions moved it: the states the once-a-second trim
-- closed count as still pooled (specs that count what went to the pools must not see them
-- go), then the recycled and restored counts, and the trimmed one.
local function pool_stats()
   local st = runtime_stats()
   local trimmed = tonumber(st.states_trimmed)
   return tonumber(st.states_pooled) + trimmed, tonumber(st.states_recycled),
      tonumber(st.states_restored), trimmed
end

-- The reply tagged tag (earlier specs may have left other messages in this inbox).
local function reply(tag)
   while true do
      local m = assert(smarm.recv(10), "no reply")
      if type(m) == "table" and m.tag == tag then return m end
   end
end

local tags = 0

-- Runs observe in a new actor (spawn_opt's opts, if given): its report and whether its
-- state was recycled.
local function observed(opts)
   tags = tags + 1
   local tag = "pool" .. tags
   local pid
   if opts then
      pid = smarm.spawn_opt(opts, observe, smarm.self(), tag)
   else
      pid = smarm.spawn(observe, smarm.self(), tag)
   end
   local m = reply(tag)
   local info = assert(smarm.info(pid))
   smarm.send(pid, "bye")
   return m.r, info.recycled
end

local function await_down(mon)
   local down = assert(mon:recv(10), "no down notice")
   return down.reason
end

local function run_dirty()
   local _, mon = smarm.spawn_monitor(dirty, smarm.self())
   assert.are.equal("dirty", smarm.recv(10))
   assert.are.equal("normal", await_down(mon))
end

local settle = stats.pool_settle

-- How many states went to the pools while body(...) ran in an actor and ended (its own
-- spawn may take one: pooled + recycled counts both ways). Waits for a change up to wait s.
-- Earlier specs' actors may still be ending (their states go to the pools too): the counts
-- are read once they have been still for a while.
local function pooled_by(wait, body, ...)
   settle()
   local p0, r0 = pool_stats()
   local pid, mon = smarm.spawn_monitor(body, ...)
   local reason = await_down(mon)
   local deadline = smarm.now() + wait
   local p, r
   repeat
      smarm.sleep(0.01)
      p, r = pool_stats()
   until p + r ~= p0 + r0 or smarm.now() > deadline
   return p + r - (p0 + r0), reason, pid
end

local function nothing() end

-- n actors alive at once (each booted: it reported), then all ending normally.
local function end_wave(n)
   local wave, mons = {}, {}
   for i = 1, n do
      wave[i], mons[i] = smarm.spawn_monitor(function(parent)
         local s = require "smarm"
         s.send(parent, { tag = "wave up" })
         s.recv()
      end, smarm.self())
   end
   for _ = 1, n do reply("wave up") end
   for i = 1, n do smarm.send(wave[i], "go") end
   for i = 1, n do assert.are.equal("normal", await_down(mons[i])) end
end

-- How many states went to the pools since pool_stats() gave p0, r0 (pooled + recycled: the
-- wave's own spawns may have taken states pooled before), once want did or 5 s passed.
local function pooled_since(p0, r0, want)
   local function went() local p, r = pool_stats() return p + r - (p0 + r0) end
   local deadline = smarm.now() + 5
   while went() < want and smarm.now() < deadline do smarm.sleep(0.01) end
   return went()
end

-- pooled_by(5, nothing), again while another actor's end got counted with it (at most 3
-- tries): 1 when an actor whose body returned gives its state to a pool.
local function pooled_by_nothing()
   local n
   for _ = 1, 3 do
      n = pooled_by(5, nothing)
      if n == 1 then break end
   end
   return n
end

-- The pooled states not reset yet (the spawn that takes one resets it).
local function dirty_count()
   return tonumber(runtime_stats().states_dirty)
end

-- The change in the dirty count once an actor ran body and ended: spawned with max_heap, it
-- makes a new state (it takes none from a pool), and its state then goes to one.
local function dirtied_by(body)
   settle()
   local d0 = dirty_count()
   local p0, r0 = pool_stats()
   local _, mon = smarm.spawn_opt({ max_heap = 64 * 1024 * 1024, monitor = true }, body)
   assert.are.equal("normal", await_down(mon))
   assert.are.equal(1, pooled_since(p0, r0, 1), "the state did not go to a pool")
   return dirty_count() - d0
end

describe("state pool", function()
   it("leaves a small state's reset to the spawn that takes it", function()
      -- the ended actor's state lies in a pool as it was: its end ran no reset
      assert.are.equal(1, dirtied_by(nothing))
      -- a spawn takes it (or another dirty one: each pool's newest first) and resets it
      -- before its boot (what the booted actor sees is the spec below's). The taker is
      -- counted while it waits: once it ends, its own state goes to a pool dirty.
      local took
      for _ = 1, 20 do
         local d0 = dirty_count()
         local pid = smarm.spawn(function(parent)
            local s = require "smarm"
            s.send(parent, { tag = "taker up" })
            s.recv()
         end, smarm.self())
         reply("taker up")
         local recycled = assert(smarm.info(pid)).recycled
         local d1 = dirty_count()
         smarm.send(pid, "bye")
         if recycled and d1 < d0 then
            took = true
            break
         end
         dirtied_by(nothing)
      end
      assert.is_true(took, "no spawn took a dirty state")
   end)

   it("resets at its end a state that holds more than a reset may leave uncollected", function()
      -- 100 KB alive at the end: its reset collects in full, at once, not at the next spawn
      assert.are.equal(0, dirtied_by(function()
         local keep = {}
         for i = 1, 2000 do keep[i] = { i } end
         return #keep
      end))
   end)

   it("reuses the state of an actor whose body returned", function()
      assert.are.equal(1, pooled_by_nothing())
      -- the spawn may boot on another scheduler than the one whose pool holds the state
      local recycled
      for _ = 1, 20 do
         pooled_by(5, nothing)
         _, recycled = observed()
         if recycled then break end
      end
      assert.is_true(recycled, "no spawn after an actor ended took its state")
   end)

   it("boots a recycled state that Lua code cannot tell from a new one", function()
      -- a new state for reference: a spawn with max_heap never takes a pooled one
      local fresh, fresh_recycled = observed({ max_heap = 64 * 1024 * 1024 })
      assert.is_false(fresh_recycled)
      assert.are.equal("nil  0", fresh.hook)
      local got
      for _ = 1, 50 do
         -- several, so each scheduler's pool holds dirtied states on top
         for _ = 1, 4 do run_dirty() end
         local r, recycled = observed()
         if recycled then
            got = r
            break
         end
      end
      assert(got, "no observer ran on a recycled state")
      for k, v in pairs(fresh) do
         assert.are.equal(v, got[k], "a recycled state differs in " .. k)
      end
      for k in pairs(got) do assert(fresh[k] ~= nil, k) end
   end)

   it("writes back the libraries a state kept, whatever its actor did to them", function()
      -- random numbers of a new state for reference
      local _, mon = smarm.spawn_monitor(check_then_dirty, smarm.self())
      local fresh = smarm.recv(10)
      assert.are.same({}, fresh.bad)
      assert.are.equal("normal", await_down(mon))
      local _, _, restored0 = pool_stats()
      for i = 1, 40 do
         _, mon = smarm.spawn_monitor(check_then_dirty, smarm.self())
         local m = assert(smarm.recv(10), "no report")
         assert.are.same({}, m.bad, "after " .. i .. " actors")
         assert.are.same(fresh.random, m.random, "math.random after " .. i .. " actors")
         assert.are.equal("normal", await_down(mon))
      end
      -- most of those states were written back, not emptied and opened anew
      local _, _, restored = pool_stats()
      local n = restored - restored0
      assert.is_true(n >= 20, "only " .. n .. " written back")
   end)

   it("makes a body anew after an actor reached its prototype's constants (jit.util)", function()
      -- the same body's bytecode again and again: a state keeps its prototype, unless jit.util
      -- could have changed the template table the body's constructor copies
      local function tmpl_body(parent)
         local function make() return { a = 1 } end
         local s = require "smarm"
         local t = make()
         s.send(parent, tostring(t.a) .. ":" .. tostring(t.pool_dirt))
         local util = require "jit.util"
         for i = -1, -8, -1 do
            local k = util.funck(make, i)
            if type(k) == "table" then
               k.a = 2
               k.pool_dirt = 1
            end
         end
      end
      for i = 1, 10 do
         local _, mon = smarm.spawn_monitor(tmpl_body, smarm.self())
         assert.are.equal("1:nil", smarm.recv(10), "after " .. i .. " actors")
         assert.are.equal("normal", await_down(mon))
      end
   end)

   it("empties the state of an actor that opened the debug library", function()
      local _, _, r0 = pool_stats()
      for _ = 1, 10 do
         local _, mon = smarm.spawn_monitor(function()
            local d = debug
            d.setmetatable(string, nil)
         end)
         assert.are.equal("normal", await_down(mon))
      end
      -- the spawns took states written back (or new); none of these was
      local _, _, r = pool_stats()
      assert.is_true(r - r0 <= 1, (r - r0) .. " written back")
   end)

   it("images a state anew after an actor with the debug library dropped its image", function()
      -- the pool keeps a pointer to each state's image beside it, good while the registry
      -- anchors the image: an actor that reached the registry (debug) drops every entry the
      -- runtime keyed there, collects, and fills the freed memory; the reset must build a new
      -- image, and the next tenants see whole libraries (under ASan: no stale read)
      local function dropper(parent)
         local s = require "smarm"
         s.send(parent, "dropping")
         local reg = debug.getregistry()
         for k in pairs(reg) do
            if type(k) == "userdata" then reg[k] = nil end
         end
         collectgarbage("collect")
         local junk = {}
         for j = 1, 300 do junk[j] = { j, tostring(j) .. "x" } end
      end
      local function user(parent, i)
         local s = require "smarm"
         s.send(parent, { tag = "user", v = string.format("%d:%s", math.floor(i + 0.5),
                                                           table.concat({ "a", "b" })) })
      end
      local _, _, r0 = pool_stats()
      for i = 1, 20 do
         local _, mon = smarm.spawn_monitor(dropper, smarm.self())
         assert.are.equal("dropping", smarm.recv(10))
         assert.are.equal("normal", await_down(mon))
         local _, mon2 = smarm.spawn_monitor(user, smarm.self(), i)
         assert.are.equal(i .. ":ab", reply("user").v, "after " .. i .. " droppers")
         assert.are.equal("normal", await_down(mon2))
      end
      -- the users' states were written back from the images the droppers' resets built
      local _, _, r = pool_stats()
      assert.is_true(r - r0 >= 10, (r - r0) .. " written back")
   end)

   it("closes a state whose userdata has a finalizer, and runs it at the actor's end", function()
      assert.are.equal(1, pooled_by_nothing())
      local n, reason = pooled_by(0.3, function(parent)
         local p = newproxy(true)
         getmetatable(p).__gc = function() require("smarm").send(parent, "finalized") end
         rawset(_G, "keep", p)
      end, smarm.self())
      assert.are.equal("normal", reason)
      assert.are.equal(0, n)
      assert.are.equal("finalized", smarm.recv(5))
   end)

   it("closes a state that opened the FFI (its C types cannot be forgotten)", function()
      assert.are.equal(1, pooled_by_nothing())
      local n = pooled_by(0.3, function()
         local f = require "ffi"
         f.cdef("struct pool_dirt { int x; };")
      end)
      assert.are.equal(0, n)
   end)

   it("closes a state that compiled traces", function()
      assert.are.equal(1, pooled_by_nothing())
      local n = pooled_by(0.3, function()
         -- an actor that computes a whole timeslice flushes its traces once, when it takes
         -- LuaJIT's own JIT parameters: that happens first, in an interpreted spin
         local s = require "smarm"
         local function spin(seconds)
            local t0 = s.now()
            while s.now() - t0 < seconds do end
         end
         jit.off(spin)
         spin(0.05)
         local util = require "jit.util"
         local t = 0
         for _ = 1, 100 do
            for i = 1, 1e4 do t = t + i end
            if util.traceinfo(1) then break end
         end
         assert(util.traceinfo(1), "no trace compiled")
      end)
      assert.are.equal(0, n)
   end)

   it("closes a state that took an arena for a large heap, also under max_heap", function()
      assert.are.equal(1, pooled_by_nothing())
      local function big()
         jit.off() -- no trace, which alone would make the state unpoolable
         local t = {}
         for i = 1, 2e5 do t[i] = { i } end -- some 10 MB: past the arena threshold
         assert(#t == 2e5)
         t = {}
         collectgarbage()
         return t
      end
      assert.are.equal(0, (pooled_by(0.3, big)))
      local p0, r0 = pool_stats()
      local _, mon = smarm.spawn_opt({ max_heap = 256 * 1024 * 1024, monitor = true }, big)
      assert.are.equal("normal", await_down(mon))
      smarm.sleep(0.3)
      local p, r = pool_stats()
      assert.are.equal(p0 + r0, p + r)
   end)

   it("recycles the state of an actor killed while it waits", function()
      -- its body's coroutine is suspended in recv: nothing of it runs again, and nothing in
      -- its state needs a finalizer (its released start channel has none left)
      assert.are.equal(1, pooled_by_nothing())
      settle()
      local p0, r0 = pool_stats()
      local tx, rx = smarm.channel()
      local pid, mon = smarm.spawn_monitor(function(ack)
         local s = require "smarm"
         rawset(_G, "killed_dirt", 1)
         ack:send("waiting")
         ack:release()
         s.recv()
      end, tx)
      tx:release()
      assert.are.equal("waiting", rx:recv(10))
      smarm.kill(pid)
      assert.are.equal("killed", await_down(mon))
      local deadline, p, r = smarm.now() + 5
      repeat
         smarm.sleep(0.01)
         p, r = pool_stats()
      until p + r ~= p0 + r0 or smarm.now() > deadline
      assert.are.equal(p0 + r0 + 1, p + r)
      -- and the next actor on it finds a state as good as new
      local recycled
      for _ = 1, 20 do
         local report
         report, recycled = observed()
         assert.is_nil(report.globals:find("killed_dirt", 1, true))
         if recycled then break end
      end
      assert.is_true(recycled, "no spawn took a pooled state")
   end)

   it("closes the state of an actor killed while it holds a live channel, and closes that",
      function()
         -- the rx's finalizer must run at the actor's end: senders then see "closed"
         assert.are.equal(1, pooled_by_nothing())
         settle()
         local p0, r0 = pool_stats()
         local pid, mon = smarm.spawn_monitor(function(parent)
            local s = require "smarm"
            local tx, rx = s.channel()
            s.send(parent, { held = tx })
            rx:recv()
         end, smarm.self())
         local m = smarm.recv(10)
         assert.is_table(m)
         smarm.kill(pid)
         assert.are.equal("killed", await_down(mon))
         smarm.sleep(0.3)
         local p, r = pool_stats()
         assert.are.equal(p0 + r0, p + r)
         assert.are.same({ nil, "closed" }, { m.held:send(1) })
      end)

   it("closes the state of an actor killed while parked on its C stack", function()
      -- a wait inside a comparator table.sort calls cannot yield: the actor keeps its C
      -- stack, and its state stops in the middle of a C call
      assert.are.equal(1, pooled_by_nothing())
      settle()
      local p0, r0 = pool_stats()
      local pid, mon = smarm.spawn_monitor(function(parent)
         local s = require "smarm"
         table.sort({ 2, 1 }, function(a, b)
            s.send(parent, "sorting")
            s.recv()
            return a < b
         end)
      end, smarm.self())
      assert.are.equal("sorting", smarm.recv(10))
      smarm.kill(pid)
      assert.are.equal("killed", await_down(mon))
      smarm.sleep(0.3)
      local p, r = pool_stats()
      assert.are.equal(p0 + r0, p + r)
   end)

   it("recycles the state of an actor that raised", function()
      local n, reason = pooled_by(5, function() error("pool crash") end)
      assert.are.equal("error", reason)
      assert.are.equal(1, n)
   end)

   it("keeps the states of a wave of ended actors, and closes those unused for a second", function()
      settle()
      local p0, r0, _, t0 = pool_stats()
      end_wave(200)
      -- a pool of 32 per scheduler would have closed most of them at once
      local went = pooled_since(p0, r0, 180)
      assert.is_true(went >= 180, ("%d states went to the pools as 200 actors ended"):format(went))
      -- nothing takes them: within a few trims (one a second) all but a few per pool are closed
      local t
      local deadline = smarm.now() + 6
      repeat
         smarm.sleep(0.1)
         t = select(4, pool_stats())
      until t - t0 >= 100 or smarm.now() > deadline
      assert.is_true(t - t0 >= 100,
         ("only %d pooled states closed 6 s after the wave"):format(t - t0))
   end)

   it("keeps every state of a wave larger than 2,048 per scheduler", function()
      -- Sleepers of a few milliseconds end in waves of thousands while new ones start
      -- (tests/bench/timers.lua peaked at 4,100-5,100 alive at -S 1): pools of 2,048 states
      -- closed the rest of each wave while the next spawns made new states.
      local n = 2048 * runtime_stats().schedulers + 256
      settle()
      local p0, r0 = pool_stats()
      end_wave(n)
      local went = pooled_since(p0, r0, n - 64)
      assert.is_true(went >= n - 64,
         ("%d states went to the pools as %d actors ended"):format(went, n))
   end)

   it("runs each body on its state's last coroutine, as good as new", function()
      -- one tenant after another, each spawned once the last has ended, so most take a state
      -- the last ones left: which state (its globals table) and coroutine each ran on, and
      -- what its body saw of them
      local seen, cos, recycled = {}, {}, 0
      for i = 1, 40 do
         local pid, mon = smarm.spawn_monitor(function(parent, ...)
            local s = require "smarm"
            local co = coroutine.running()
            s.send(parent, { tag = "co", state = tostring(_G), co = tostring(co),
                             nargs = select("#", ...), last = select(select("#", ...), ...),
                             status = coroutine.status(co), env = getfenv(0) == _G,
                             top = select("#", coroutine.resume(co)) })
            s.recv()
         end, smarm.self(), i, nil, "last")
         local m = reply("co")
         local info = assert(smarm.info(pid))
         smarm.send(pid, "bye")
         assert.are.equal("normal", await_down(mon))
         seen[#seen + 1] = ("%d %s %s %s %d"):format(m.nargs, tostring(m.last), m.status,
                                                     tostring(m.env), m.top)
         if info.recycled then
            recycled = recycled + 1
            cos[m.state] = cos[m.state] or {}
            cos[m.state][m.co] = true
         end
      end
      for i = 1, #seen do assert.are.equal("3 last running true 2", seen[i]) end
      assert.is_true(recycled >= 20, recycled .. " of 40 tenants took a pooled state")
      -- a new coroutine per tenant would leave the last one's (half a kilobyte with its
      -- stack) as garbage until the pool's collection at 32 KB
      for state, set in pairs(cos) do
         local n = 0
         for _ in pairs(set) do n = n + 1 end
         assert.are.equal(1, n, "tenants of the state of globals " .. state .. " ran on " ..
                          n .. " coroutines")
      end
   end)

   it("gives a spawn with max_heap a new state", function()
      assert.are.equal(1, pooled_by_nothing())
      local p0 = pool_stats()
      assert.is_true(p0 > 0)
      local _, recycled = observed({ max_heap = 1024 * 1024 })
      assert.is_false(recycled)
   end)
end)
