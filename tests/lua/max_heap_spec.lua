-- max_heap: every overflow ends the actor with reason "memory", wherever it happens (while
-- the state is made, booted, opening the FFI, inside a pcall, with finalizers to run at
-- close), and the runtime carries on. These actors print one "stopped (memory)" line each.
-- The bodies keep what they allocate without reading it:
-- luacheck: ignore 241

-- Allocates without end.
local function grow()
   local t = {}
   while true do t[#t + 1] = ("x"):rep(10) .. #t end
end

-- Returns at once: ends "normal" when the booted state fits in max_heap.
local function nothing() end

-- 100 FFI finalizers, left for lua_close to run.
local function ffi_gc()
   local ffi = require "ffi"
   local keep = {}
   for i = 1, 100 do keep[i] = ffi.gc(ffi.new("int[1]"), function() end) end
end

-- 100 FFI finalizers, then allocates without end: the state is closed with them pending.
local function ffi_gc_then_grow()
   local ffi = require "ffi"
   local keep = {}
   for i = 1, 100 do keep[i] = ffi.gc(ffi.new("int[1]"), function() end) end
   local t = {}
   while true do t[#t + 1] = ("x"):rep(10) .. #t end
end

-- The library's own FFI use (smarm.info loads the FFI and its cdefs), then allocates.
local function info_then_grow()
   local s = require "smarm"
   for _ = 1, 3 do s.info(s.self()) end
   local t = {}
   while true do t[#t + 1] = {} end
end

-- Catches the overflow and would report that it went on.
local function catch_and_go_on(parent, how)
   local s = require "smarm"
   local ok
   if how == "loop" then
      ok = pcall(function()
         local t = {}
         while true do t[#t + 1] = ("x"):rep(100) .. #t end
      end)
   elseif how == "one_big" then
      ok = pcall(string.rep, "x", 4 * 1024 * 1024)
   elseif how == "xpcall" then
      ok = xpcall(function()
         local t = {}
         while true do t[#t + 1] = {} end
      end, debug.traceback)
   elseif how == "retry" then
      for _ = 1, 100 do
         pcall(function()
            local t = {}
            for i = 1, 1e5 do t[i] = { i } end
         end)
      end
   end
   s.send(parent, { went_on = true, ok = ok })
   return "went on"
end

-- Waits in recv (its state parked, the coroutine suspended) for a message too large for it.
local function wait_for_big(parent)
   local s = require "smarm"
   s.send(parent, "waiting")
   local m = s.recv()
   s.send(parent, { got = type(m) })
end

local smarm = require "smarm"   -- below the bodies, so none of them can capture it

-- Spawns body under max_heap = n with a monitor; returns the reason it ended with.
local function reason_under(n, body, ...)
   local _, mon = smarm.spawn_opt({ max_heap = n, monitor = true }, body, ...)
   local down, err = mon:recv(30)
   assert(down, ("max_heap = %d: no down notice (%s)"):format(n, tostring(err)))
   return down.reason
end

-- A plain actor still starts, answers and ends normally.
local function runtime_survives()
   local _, mon = smarm.spawn_monitor(function(parent)
      require("smarm").send(parent, "alive")
   end, smarm.self())
   assert.are.equal("alive", smarm.recv(10))
   assert.are.equal("normal", assert(mon:recv(10), "no down notice").reason)
end

describe("max_heap", function()
   it("ends every actor with memory, or normal if it fits, for max_heap 4000..70000", function()
      local fitted, first_fit = 0, nil
      for n = 4000, 70000, 37 do
         assert.are.equal("memory", reason_under(n, grow), "grow, max_heap = " .. n)
         assert.are.equal("memory", reason_under(n, ffi_gc_then_grow),
                          "ffi.gc, max_heap = " .. n)
         assert.are.equal("memory", reason_under(n, info_then_grow), "info, max_heap = " .. n)
         local r = reason_under(n, nothing)
         assert.is_true(r == "memory" or r == "normal", ("nothing, max_heap = %d: %s"):format(n, r))
         if r == "normal" then
            fitted = fitted + 1
            first_fit = first_fit or n
         end
      end
      -- a booted state takes about 12 KB: the small limits end at boot, the large ones fit
      assert.is_true(first_fit ~= nil and first_fit > 4000, "first fit " .. tostring(first_fit))
      assert.is_true(fitted > 1000, "only " .. fitted .. " fitted")
      runtime_survives()
   end)

   it("closes states with 100 FFI finalizers for max_heap 20000..30000", function()
      -- the FFI opened half-way when the limit hit inside it, and lua_close then crashed
      -- on its missing finalizer table (for example at max_heap = 24040): a window of a
      -- few dozen bytes, so every third byte
      for n = 20000, 30000, 3 do
         local r = reason_under(n, ffi_gc)
         assert.is_true(r == "memory" or r == "normal", ("max_heap = %d: %s"):format(n, r))
      end
      assert.are.equal("memory", reason_under(24040, ffi_gc_then_grow))
      runtime_survives()
   end)

   it("ends an actor with memory when max_heap = 1 (its boot alone is over)", function()
      assert.are.equal("memory", reason_under(1, nothing))
      assert.are.equal("memory", reason_under(1, grow))
      runtime_survives()
   end)

   it("stops the actor with memory even when a pcall catches the overflow", function()
      for _, how in ipairs({ "loop", "one_big", "xpcall", "retry" }) do
         local pid, mon = smarm.spawn_opt({ max_heap = 256 * 1024, monitor = true },
                                          catch_and_go_on, smarm.self(), how)
         local down = assert(mon:recv(30), how .. ": no down notice")
         assert.are.equal("memory", down.reason, how)
         assert.are.equal("memory", smarm.terminal_reason(pid), how)
         -- anything it sent arrived before it died
         local m, err = smarm.recv(0)
         assert.is_nil(m, how .. ": it went on after the overflow")
         assert.are.equal("timeout", err)
      end
   end)

   it("ends with memory an actor whose wake decodes a message past its max_heap", function()
      -- the decode runs in the wait's continuation, on the suspended coroutine; the refused
      -- allocation ends the actor there, flat message or codec alike, and nothing else
      for _, nested in ipairs({ false, true }) do
         local pid, mon = smarm.spawn_opt({ max_heap = 256 * 1024, monitor = true },
                                          wait_for_big, smarm.self())
         assert.are.equal("waiting", smarm.recv(10))
         smarm.sleep(0.02) -- parked in its recv by now
         local big = ("x"):rep(1024 * 1024)
         smarm.send(pid, nested and { { big } } or big)
         local down = assert(mon:recv(30), "no down notice")
         assert.are.equal("memory", down.reason)
         assert.is_nil((smarm.recv(0)), "it went on after the overflow")
      end
      runtime_survives()
   end)

   it("sends a linked actor the reason memory for an overflow a pcall caught", function()
      local rx = smarm.trap_exit(true)
      local pid = smarm.spawn_opt({ max_heap = 256 * 1024, link = true }, catch_and_go_on,
                                  smarm.self(), "one_big")
      local sig = assert(rx:recv(30), "no exit signal")
      assert.are.equal(pid, sig.from)
      assert.are.equal("memory", sig.reason)
      smarm.trap_exit(false)
      assert.is_nil((smarm.recv(0)), "it went on after the overflow")
   end)
end)
