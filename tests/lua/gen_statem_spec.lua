-- gen_statem: the Switch machine, enter calls, postpone and replay, next_event, the three
-- kinds of timeout and their cancellation, call/cast/stop, handle_event_function mode,
-- names, crashes and trap_exit.
local smarm = require "smarm"
local gen_statem = require "smarm.gen_statem"

local inbox = require "support.inbox"
local expect, none = inbox.expect, inbox.none

local function lab(enter)
   return assert(gen_statem.start("support.lab", { report = smarm.self(), enter = enter }))
end

describe("gen_statem", function()
   it("runs the Switch machine to flips=1, enters=3", function()
      local sw = assert(gen_statem.start("support.switch", nil))
      assert.are.same({ state = "off", flips = 0, enters = 1 }, gen_statem.call(sw, "get"))
      gen_statem.cast(sw, "flip")
      gen_statem.cast(sw, "stay")
      gen_statem.cast(sw, "flip")
      assert.are.same({ state = "off", flips = 1, enters = 3 }, gen_statem.call(sw, "get", 5))
      assert.is_true(gen_statem.stop(sw, "normal", 5))
   end)

   it("runs the Switch example", function()
      local p = io.popen("build/smarm-lua examples/switch.lua 2>&1")
      local out = p:read("*a")
      p:close()
      assert.matches("state=off flips=1 enters=3", out)
   end)

   it("makes enter calls on start and on a change, not on a stay", function()
      local m = lab(true)
      assert.are.same({ enter = "idle", old = "idle" }, expect("enter"))
      gen_statem.cast(m, "work")
      assert.are.same({ enter = "busy", old = "idle" }, expect("enter"))
      gen_statem.cast(m, { "ping", 1 })
      expect("ping")
      gen_statem.cast(m, "done")
      assert.are.same({ enter = "idle", old = "busy" }, expect("enter"))
      gen_statem.cast(m, { "ping", 2 })
      assert.are.equal(2, expect("ping").ping)
      none("enter", 0.02)
      gen_statem.stop(m, "normal", 5)
   end)

   it("postpones events and replays them in order after a state change", function()
      local m = lab(false)
      gen_statem.cast(m, "work")
      gen_statem.cast(m, { "job", "a" })
      gen_statem.cast(m, { "job", "b" })
      assert.are.equal("busy", gen_statem.call(m, "state", 5))
      assert.are.same({}, gen_statem.call(m, "log", 5))
      -- a postponed call waits for its reply until the state changes
      local helper = smarm.spawn(function(machine, parent)
         local g = require "smarm.gen_statem"
         require("smarm").send(parent, { helper = g.call(machine, { "job", "c" }, 5) })
      end, m, smarm.self())
      none("helper", 0.05)
      gen_statem.cast(m, "done")
      assert.are.equal("done c", expect("helper").helper)
      assert.are.equal("idle", gen_statem.call(m, "state", 5))
      assert.are.same({ "a", "b", "c" }, gen_statem.call(m, "log", 5))
      assert.is_truthy(helper)
      gen_statem.stop(m, "normal", 5)
   end)

   it("runs next_event events before queued ones, in order", function()
      local m = lab(false)
      gen_statem.cast(m, { "next", "x", "y", "z" })
      gen_statem.cast(m, { "job", "after" })
      assert.are.same({ "x", "y", "z", "after" }, gen_statem.call(m, "log", 5))
      gen_statem.stop(m, "normal", 5)
   end)

   it("fires a state_timeout, and cancels it on a state change", function()
      local m = lab(false)
      local t0 = smarm.now()
      gen_statem.cast(m, { "state_timeout", 0.03, "first" })
      local f = expect("fired")
      assert.are.same({ "state_timeout", "first", "idle" }, { f.fired, f.msg, f.state })
      assert.is_true(f.at - t0 >= 0.03)
      gen_statem.cast(m, { "state_timeout", 0.05, "never" })
      gen_statem.cast(m, "work")
      none("fired", 0.1)
      -- a state_timeout set with the transition belongs to the new state
      gen_statem.cast(m, "done")
      gen_statem.cast(m, { "work", { { "state_timeout", 0.02, "busy one" } } })
      f = expect("fired")
      assert.are.same({ "busy one", "busy" }, { f.msg, f.state })
      gen_statem.stop(m, "normal", 5)
   end)

   it("fires an event timeout, and cancels it on any event", function()
      local m = lab(false)
      gen_statem.cast(m, { "timeout", 0.03, "quiet" })
      local f = expect("fired")
      assert.are.same({ "timeout", "quiet" }, { f.fired, f.msg })
      gen_statem.cast(m, { "timeout", 0.06, "never" })
      smarm.send(m, "any event")
      assert.are.equal("any event", expect("info").info)
      none("fired", 0.12)
      gen_statem.stop(m, "normal", 5)
   end)

   it("fires generic timeouts by name, re-arming replaces, state changes keep them", function()
      local m = lab(false)
      gen_statem.cast(m, { "generic", "a", 0.03 })
      gen_statem.cast(m, { "generic", "b", 0.5 })
      gen_statem.cast(m, { "generic", "b", 0.06 }) -- replaces b's first timer
      gen_statem.cast(m, "work")                   -- neither is cancelled by a change
      local t0 = smarm.now()
      local f1 = expect("fired")
      local f2 = expect("fired")
      assert.are.same({ "generic_timeout", "a" }, { f1.fired, f1.msg })
      assert.are.same({ "generic_timeout", "b" }, { f2.fired, f2.msg })
      assert.is_true(f2.at - t0 < 0.4)
      none("fired", 0.05)
      gen_statem.stop(m, "normal", 5)
   end)

   it("takes calls, casts and info; stops with terminate", function()
      local m = lab(false)
      local mon = smarm.monitor(m)
      assert.are.equal("done q", gen_statem.call(m, { "job", "q" }, 5))
      smarm.send(m, { hello = 1 })
      assert.are.same({ hello = 1 }, expect("info").info)
      assert.are.equal("stopping", gen_statem.call(m, "stop", 5))
      assert.are.same({ terminated = "normal", state = "idle" }, expect("terminated"))
      assert.are.equal("normal", assert(mon:recv(5)).reason)

      m = lab(false)
      mon = smarm.monitor(m)
      assert.is_true(gen_statem.stop(m, "enough", 5))
      assert.are.equal("enough", expect("terminated").terminated)
      assert.are.equal("enough", assert(mon:recv(5)).reason)
   end)

   it("crashes on an error: callers get server_down, terminate sees error", function()
      local m = lab(false)
      local mon = smarm.monitor(m)
      gen_statem.cast(m, "work")
      gen_statem.cast(m, "crash")
      assert.are.same({ nil, "server_down" }, { gen_statem.call(m, "state", 5) })
      assert.are.equal("error", expect("terminated").terminated)
      local down = assert(mon:recv(5))
      assert.are.equal("error", down.reason)
      assert.matches("lab crashed", down.error)
      assert.are.same({ nil, "noproc" }, { gen_statem.call(m, "state", 1) })
   end)

   it("runs handle_event_function machines", function()
      local door = assert(gen_statem.start("support.door", { code = "42", open_for = 0.03 }))
      assert.are.same({ state = "locked", opened = 0 }, gen_statem.call(door, "?"))
      gen_statem.cast(door, { "button", "1" })
      gen_statem.cast(door, { "button", "2" })
      assert.are.same({ state = "locked", opened = 0 }, gen_statem.call(door, "?"))
      gen_statem.cast(door, { "button", "4" })
      gen_statem.cast(door, { "button", "2" })
      assert.are.same({ state = "open", opened = 1 }, gen_statem.call(door, "?"))
      smarm.sleep(0.1)
      assert.are.same({ state = "locked", opened = 1 }, gen_statem.call(door, "?"))
      gen_statem.stop(door, "normal", 5)
   end)

   it("registers names, refuses a clash, and serves by name", function()
      local sw = assert(gen_statem.start("support.switch", nil, { name = "gen_statem_spec.sw" }))
      assert.are.equal(sw, smarm.whereis("gen_statem_spec.sw"))
      assert.are.same({ nil, "taken" },
         { gen_statem.start("support.switch", nil, { name = "gen_statem_spec.sw" }) })
      gen_statem.cast("gen_statem_spec.sw", "flip")
      assert.are.equal("on", gen_statem.call("gen_statem_spec.sw", "get", 5).state)
      assert.is_true(gen_statem.stop("gen_statem_spec.sw", "normal", 5))
      assert.is_nil(smarm.whereis("gen_statem_spec.sw"))
   end)

   it("runs inline with run, and stops on shutdown when trapping", function()
      local pid, mon = smarm.spawn_monitor(function(parent)
         require("smarm.gen_statem").run("support.lab", { report = parent, trap = true },
            { name = "gen_statem_spec.inline" })
      end, smarm.self())
      local found
      for _ = 1, 200 do
         found = smarm.whereis("gen_statem_spec.inline")
         if found then break end
         smarm.sleep(0.005)
      end
      assert.are.equal(pid, found)
      assert.are.equal("idle", gen_statem.call("gen_statem_spec.inline", "state", 5))
      smarm.shutdown(pid)
      assert.are.equal("shutdown", expect("terminated").terminated)
      assert.are.equal("shutdown", assert(mon:recv(5)).reason)
   end)

   it("takes malformed protocol messages as info events, and keeps running", function()
      local m = lab(false)
      local mon = smarm.monitor(m)
      local malformed = {
         { smarm = "call", req = "state" },              -- no reply handle
         { smarm = "call", req = "state", from = 42 },   -- a reply handle that is not a tx
         { smarm = "stop" },                             -- no reason
         { smarm = "statem_timeout" },                   -- no key, ref or event type
         { smarm = "statem_timeout", key = "state", ref = "1", etype = "state_timeout" },
         { smarm = "code_change", req = {}, from = 42 },
      }
      for i, msg in ipairs(malformed) do
         smarm.send(m, msg)
         local info = expect("info")
         assert.are.equal(msg.smarm, info.info.smarm, "message " .. i)
         assert.are.equal("idle", gen_statem.call(m, "state", 5), "message " .. i)
      end
      assert.is_nil(mon:recv(0))
      assert.is_true(gen_statem.stop(m, "normal", 5))
   end)
end)
