-- An actor's standard libraries open on first use, each on its own, and yet its _G lists
-- every one of them, as plain LuaJIT's does.
local smarm = require "smarm"

-- The reply tagged tag (earlier specs may have left other messages in this inbox).
local function reply(tag)
   while true do
      local m = assert(smarm.recv(5), "no reply")
      if type(m) == "table" and m.tag == tag then return m end
   end
end

-- Runs body(tag) in a fresh actor (body must send {tag = tag, ...} to its parent).
local function in_fresh_actor(tag, body)
   smarm.spawn(body, smarm.self(), tag)
   return reply(tag)
end

local function sorted(t)
   table.sort(t)
   return table.concat(t, " ")
end

-- What `for k in pairs(_G)` and `for k in pairs(package.loaded)` list in plain LuaJIT 2.1
-- (its command line adds `arg`, left out here).
local LUAJIT_GLOBALS = "_G _VERSION assert bit collectgarbage coroutine debug dofile error "
   .. "gcinfo getfenv getmetatable io ipairs jit load loadfile loadstring math module newproxy "
   .. "next os package pairs pcall print rawequal rawget rawset require select setfenv "
   .. "setmetatable string table tonumber tostring type unpack xpcall"
local LUAJIT_LOADED = "_G bit coroutine debug io jit jit.opt math os package string table"
local OS_FUNCS = "clock date difftime execute exit getenv remove rename setlocale time tmpname"

-- The same lists from the luajit this runtime was built with, when it is at hand.
local function plain_luajit(expr)
   local f = io.open("build/deps/luajit/src/luajit", "rb")
   if not f then return nil end
   f:close()
   local p = assert(io.popen("build/deps/luajit/src/luajit -e '"
      .. "local t = {} for k in pairs(" .. expr .. ") do t[#t + 1] = k end "
      .. "table.sort(t) io.write(table.concat(t, \" \"))'"))
   local out = p:read("*a")
   p:close()
   return (out:gsub("^arg ", ""):gsub(" arg ", " "):gsub(" arg$", ""))
end

describe("globals", function()
   it("opens a library on the first mention of its name, without the base library", function()
      -- in a new state (a spawn with max_heap never takes a pooled one, whose image may hold
      -- the libraries its last actors used)
      smarm.spawn_opt({ max_heap = 64 * 1024 * 1024 }, function(parent)
         local s = require "smarm"
         local loaded = debug.getregistry()._LOADED
         s.send(parent, { tag = "one", debug = loaded.debug ~= nil, base = loaded._G ~= nil })
      end, smarm.self())
      local m = reply("one")
      assert.is_true(m.debug)
      assert.is_false(m.base)
   end)

   it("lists every standard library in pairs(_G) before any is used", function()
      local m = in_fresh_actor("pairs_G", function(parent, tag)
         local keys = {}
         for k in pairs(_G) do keys[#keys + 1] = k end
         require("smarm").send(parent, { tag = tag, keys = keys })
      end)
      assert.are.equal(LUAJIT_GLOBALS, sorted(m.keys))
      local plain = plain_luajit("_G")
      if plain then assert.are.equal(plain, sorted(m.keys)) end
   end)

   it("lists every standard library through next(_G) alone", function()
      local m = in_fresh_actor("next_G", function(parent, tag)
         local keys, k = {}, next(_G)
         while k ~= nil do
            keys[#keys + 1] = k
            k = next(_G, k)
         end
         require("smarm").send(parent, { tag = tag, keys = keys })
      end)
      assert.are.equal(LUAJIT_GLOBALS, sorted(m.keys))
   end)

   it("lists every library in pairs(package.loaded)", function()
      local m = in_fresh_actor("loaded", function(parent, tag)
         local keys = {}
         for k in pairs(package.loaded) do keys[#keys + 1] = k end
         require("smarm").send(parent, { tag = tag, keys = keys })
      end)
      assert.are.equal(LUAJIT_LOADED, sorted(m.keys))
      local plain = plain_luajit("package.loaded")
      if plain then assert.are.equal(plain, sorted(m.keys)) end
   end)

   it("gives a complete library table on first use (os, string)", function()
      local m = in_fresh_actor("libs", function(parent, tag)
         local os_keys, n_string = {}, 0
         for k in pairs(os) do os_keys[#os_keys + 1] = k end
         for _ in pairs(string) do n_string = n_string + 1 end
         require("smarm").send(parent, { tag = tag, os = os_keys, n_string = n_string })
      end)
      assert.are.equal(OS_FUNCS, sorted(m.os))
      local n = 0
      for _ in pairs(string) do n = n + 1 end
      assert.are.equal(n, m.n_string)
   end)

   it("keeps require, package.loaded and _G agreeing", function()
      local m = in_fresh_actor("require", function(parent, tag)
         local o = require("os")
         local same = o == os and package.loaded.os == os and require("string") == string
            and package.loaded.string == string and getmetatable("").__index == string
         require("smarm").send(parent, { tag = tag, same = same })
      end)
      assert.is_true(m.same)
   end)

   it("gives strings their methods before the string library is named", function()
      local m = in_fresh_actor("methods", function(parent, tag)
         local up = ("abc"):upper()
         require("smarm").send(parent, { tag = tag, up = up })
      end)
      assert.are.equal("ABC", m.up)
   end)

   it("opens nothing more for a pairs loop over an ordinary table", function()
      -- a new state (max_heap: never a pooled one, whose image may hold os already)
      smarm.spawn_opt({ max_heap = 64 * 1024 * 1024 }, function(parent, tag)
         local sum = 0
         for i = 1, 300 do
            for _, v in pairs({ a = i, b = 1 }) do sum = sum + v end
         end
         local loaded = debug.getregistry()._LOADED
         require("smarm").send(parent, {
            tag = tag, sum = sum, os = loaded.os ~= nil, io = loaded.io ~= nil,
         })
      end, smarm.self(), "lazy")
      local m = reply("lazy")
      assert.are.equal(300 * 301 / 2 + 300, m.sum)
      assert.is_false(m.os)
      assert.is_false(m.io)
   end)

   it("walks tables with metatables, and gives _G the builtin pairs once all is open", function()
      local m = in_fresh_actor("after", function(parent, tag)
         local obj = setmetatable({ x = 1, y = 2 }, { __index = function() return 0 end })
         local sum = 0
         for _, v in pairs(obj) do sum = sum + v end
         local marked = getmetatable(debug.getregistry()._LOADED) ~= nil
         local n = 0
         for _ in pairs(_G) do n = n + 1 end
         require("smarm").send(parent, {
            tag = tag, sum = sum, marked = marked, n = n,
            builtin = tostring(rawget(_G, "pairs")):match("builtin") ~= nil,
            unmarked = getmetatable(package.loaded) == nil,
         })
      end)
      assert.are.equal(3, m.sum)
      assert.is_true(m.marked)
      assert.is_true(m.builtin)
      assert.is_true(m.unmarked)
   end)

   it("raises pairs' own error for a non-table", function()
      local m = in_fresh_actor("err", function(parent, tag)
         local _, err = pcall(function()
            for _ in pairs(3) do end
         end)
         require("smarm").send(parent, { tag = tag, err = err })
      end)
      assert.matches("bad argument #1 to 'pairs' %(table expected, got number%)", m.err)
   end)

   it("requires jit.util, jit.opt and jit.profile before jit is named", function()
      local m = in_fresh_actor("jitmods", function(parent, tag)
         local util = require "jit.util"
         local opt = require "jit.opt"
         local profile = require "jit.profile"
         require("smarm").send(parent, {
            tag = tag,
            util = type(util) == "table" and type(util.traceinfo) == "function",
            opt = type(opt) == "table" and opt == jit.opt,
            profile = type(profile) == "table" and type(profile.start) == "function",
            same = require("jit.util") == package.loaded["jit.util"],
         })
      end)
      assert.is_true(m.util)
      assert.is_true(m.opt)
      assert.is_true(m.profile)
      assert.is_true(m.same)
   end)

   it("requires table.new and table.clear before table is named", function()
      local m = in_fresh_actor("tabmods", function(parent, tag)
         local new = require "table.new"
         local clear = require "table.clear"
         local t = new(4, 2)
         t[1], t.x = 1, 2
         local n = 0
         for _ in pairs(t) do n = n + 1 end
         clear(t)
         require("smarm").send(parent, {
            tag = tag,
            kinds = type(new) .. " " .. type(clear),
            filled = n,
            cleared = next(t) == nil,
            same = require("table.new") == package.loaded["table.new"],
            -- as under plain luajit: the library gains each as a field once required
            fields = table.new == new and table.clear == clear,
         })
      end)
      assert.equals("function function", m.kinds)
      assert.equals(2, m.filled)
      assert.is_true(m.cleared)
      assert.is_true(m.same)
      assert.is_true(m.fields)
   end)
end)
