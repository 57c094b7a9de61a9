-- require in an actor's state: the library's modules (smarm.*) and files on the path load
-- without opening the package library until something asks for it, with require's own
-- rules (package.loaded first, the module's name as its argument, true for a module that
-- returns nothing, an error for a loop), and the package library opened later agrees.
local smarm = require "smarm"
local inbox = require "support.inbox"

describe("require", function()
   it("loads the library's modules and files without opening the package library", function()
      smarm.spawn(function(parent)
         local s = require "smarm"
         local gen_server = require "smarm.gen_server"
         local counter = require "support.counter"
         local loaded = debug.getregistry()._LOADED
         s.send(parent, {
            unopened = true,
            package = loaded.package ~= nil,
            global = rawget(_G, "package") ~= nil,
            gen_server = type(gen_server.call) == "function",
            counter = type(counter.handle_call) == "function",
            same = require("support.counter") == counter and loaded["support.counter"] == counter,
         })
      end, smarm.self())
      local m = inbox.expect("unopened")
      assert.is_false(m.package)
      assert.is_false(m.global)
      assert.is_true(m.gen_server)
      assert.is_true(m.counter)
      assert.is_true(m.same)
   end)

   it("keeps require's rules, and the package library opened later agrees", function()
      smarm.spawn(function(parent)
         local s = require "smarm"
         local first = require "support.require_nothing"
         local again = require "support.require_nothing"
         local ok, err = pcall(require, "support.require_loop")
         local ok2, err2 = pcall(require, "support.require_loop")
         local counter = require "support.counter"
         s.send(parent, {
            rules = true,
            first = first,
            again = again,
            loads = rawget(_G, "require_nothing_loads"),
            loop = not ok and tostring(err) or "no error",
            previous = not ok2 and tostring(err2) or "no error",
            -- now the package library opens: what it finds loaded is what require gave
            same = package.loaded["support.counter"] == counter
               and package.loaded["support.require_nothing"] == true,
            missing = select(2, pcall(require, "support.no_such_module")),
         })
      end, smarm.self())
      local m = inbox.expect("rules")
      assert.are.equal(true, m.first)
      assert.are.equal(true, m.again)
      assert.are.equal(1, m.loads)
      assert.matches("loop or previous error loading module 'support.require_loop'", m.loop,
         1, true)
      assert.matches("loop or previous error loading module 'support.require_loop'",
         m.previous, 1, true)
      assert.is_true(m.same)
      assert.matches("module 'support.no_such_module' not found", m.missing, 1, true)
   end)
end)

describe("a module's load", function()
   it("does not count its code as garbage to collect for", function()
      -- a module of 300 functions whose chunk makes one closure when it runs
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -p " .. dir) == 0)
      local name = "big_code_" .. (smarm.self() % 100000)
      local f = assert(io.open(dir .. "/" .. name .. ".lua", "w"))
      f:write("return function(x)\n")
      for i = 1, 300 do
         f:write(("   do local function f%d(a) return a + %d, 'k%d' end end\n"):format(i, i, i))
      end
      f:write("   return x\nend\n")
      f:close()
      smarm.spawn(function(parent, d, n)
         local s = require "smarm"
         package.path = d .. "/?.lua;" .. package.path
         -- a collector that starts a cycle as soon as the heap grows past what a cycle
         -- kept, and finishes it in a few steps of allocation
         collectgarbage("setpause", 100)
         collectgarbage("setstepmul", 1000)
         collectgarbage("collect")
         -- cleared by the first cycle that completes from here
         local weak = setmetatable({}, { __mode = "v" })
         weak[1] = {}
         local before = collectgarbage("count")
         local m = require(n)
         s.send(parent, { big = true, kept = weak[1] ~= nil, ok = m(7) == 7,
            live = before, grown = collectgarbage("count") - before })
      end, smarm.self(), dir, name)
      local m = inbox.expect("big")
      os.execute("rm -rf " .. dir)
      assert.is_true(m.ok)
      -- more code than the state kept: counted as allocation, it was enough to start and
      -- finish a cycle as the module's chunk ran
      assert.is_true(m.grown > m.live, ("grew %.1f KB on %.1f KB"):format(m.grown, m.live))
      assert.is_true(m.kept, "a cycle ran for the module's code")
   end)
end)
