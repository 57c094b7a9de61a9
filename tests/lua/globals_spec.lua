-- An actor's state is a complete LuaJIT environment, though its libraries open on first use.
local smarm = require "smarm"

-- The reply tagged tag (earlier specs may have left other messages in this inbox).
local function reply(tag)
   while true do
      local m = assert(smarm.recv(5), "no reply")
      if type(m) == "table" and m.tag == tag then return m end
   end
end

local LIBRARIES = { "bit", "coroutine", "debug", "io", "jit", "math", "os", "package", "string",
                    "table" }

describe("globals", function()
   it("lists every standard library in pairs(_G), opened or not", function()
      smarm.spawn(function(parent, libs)
         local s = require "smarm"
         local seen = {}
         for k, v in pairs(_G) do
            seen[k] = type(v)
         end
         local missing = {}
         for _, name in ipairs(libs) do
            if seen[name] ~= "table" then missing[#missing + 1] = name end
         end
         s.send(parent, { tag = "all", missing = table.concat(missing, " "), print = seen.print,
                          require = seen.require, floor = math.floor(2.5),
                          again = pairs({ x = 1 }) == next })
      end, smarm.self(), LIBRARIES)
      local m = reply("all")
      assert.are.equal("", m.missing)
      assert.are.equal("function", m.print)
      assert.are.equal("function", m.require)
      assert.are.equal(2, m.floor)
      assert.is_true(m.again)
   end)

   it("opens a library on the first mention of its name, without the base library", function()
      smarm.spawn(function(parent)
         local s = require "smarm"
         local loaded = debug.getregistry()._LOADED
         s.send(parent, { tag = "one", debug = loaded.debug ~= nil, base = loaded._G ~= nil })
      end, smarm.self())
      local m = reply("one")
      assert.is_true(m.debug)
      assert.is_false(m.base)
   end)

   it("keeps pairs working on other tables before pairs(_G)", function()
      smarm.spawn(function(parent)
         local s = require "smarm"
         local n = 0
         for _ in pairs({ a = 1, b = 2, 3 }) do
            n = n + 1
         end
         local ok, err = pcall(pairs, nil)
         s.send(parent, { tag = "pairs", n = n, ok = ok, err = tostring(err) })
      end, smarm.self())
      local m = reply("pairs")
      assert.are.equal(3, m.n)
      assert.is_false(m.ok)
      assert.matches("table expected", m.err)
   end)
end)
