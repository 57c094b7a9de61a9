-- An actor's standard libraries open on first use, each on its own.
local smarm = require "smarm"

-- The reply tagged tag (earlier specs may have left other messages in this inbox).
local function reply(tag)
   while true do
      local m = assert(smarm.recv(5), "no reply")
      if type(m) == "table" and m.tag == tag then return m end
   end
end

describe("globals", function()
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
end)
