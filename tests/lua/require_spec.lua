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
