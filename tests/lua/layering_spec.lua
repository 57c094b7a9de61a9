-- Layering of the Lua library: gen_server and gen_statem share smarm.gen and neither
-- reaches into the other.
local smarm = require "smarm"
local gen_server = require "smarm.gen_server"
local gen_statem = require "smarm.gen_statem"

local expect = require("support.inbox").expect

-- The Lua files matching glob, as {name = source text}.
local function sources(glob)
   local out = {}
   local ls = assert(io.popen("ls " .. glob))
   for path in ls:lines() do
      local f = assert(io.open(path))
      out[path:match("([^/]+)%.lua$")] = f:read("*a")
      f:close()
   end
   ls:close()
   return out
end

describe("library layering", function()
   it("runs a gen_statem without loading gen_server", function()
      local m = assert(gen_statem.start("support.probe", { report = smarm.self() }))
      local loaded = expect("loaded", 5).loaded
      assert.is_true(loaded["smarm.gen_statem"])
      assert.is_true(loaded["smarm.gen"])
      assert.is_false(loaded["smarm.gen_server"])
      assert.is_true(gen_statem.stop(m, "normal", 5))
   end)

   it("runs a gen_server without loading gen_statem", function()
      local s = assert(gen_server.start("support.probe", { report = smarm.self() }))
      local loaded = expect("loaded", 5).loaded
      assert.is_true(loaded["smarm.gen_server"])
      assert.is_false(loaded["smarm.gen_statem"])
      assert.is_true(gen_server.stop(s, "normal", 5))
   end)

   it("has no module reading another module's private (underscore) fields", function()
      local library = sources("lua/smarm/*.lua")
      assert.is_truthy(library.gen)
      for name, text in pairs(library) do
         for line in text:gmatch("[^\n]+") do
            local code = line:gsub("%-%-.*$", "")
            for base, field in code:gmatch("([%w_%)]+)%.(_[%w_]+)") do
               assert(base == "M", ("%s.lua reaches into %s.%s: %s"):format(name, base, field,
                  line))
            end
         end
      end
   end)

   it("keeps info and snapshot in smarm.introspection, which smarm's table loads", function()
      local introspection = require "smarm.introspection"
      assert.are.equal("function", type(introspection.info))
      assert.are.equal("function", type(introspection.snapshot))
      -- a fresh actor's first smarm.info loads the module
      smarm.spawn(function(parent)
         local s = require "smarm"
         local info = s.info(s.self())
         s.send(parent, { probed = info.pid == s.self(),
            loaded = package.loaded["smarm.introspection"] ~= nil })
      end, smarm.self())
      local m = expect("probed", 5)
      assert.is_true(m.probed)
      assert.is_true(m.loaded)
   end)

   it("keeps bug history and measurements out of code comments", function()
      local files = sources("lua/smarm/*.lua")
      for name, text in pairs(sources("tests/lua/*.lua")) do files[name] = text end
      for name, text in pairs(files) do
         for comment in text:gmatch("%-%-([^\n]*)") do
            for _, pat in ipairs({ "[Ff]ound by ", "^%s*fails[%s:]", "%d%s*%->%s*%d" }) do
               assert(not comment:find(pat), ("%s.lua: %s"):format(name, comment))
            end
         end
      end
   end)
end)
