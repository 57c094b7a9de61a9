-- gen_server and gen_statem with OTP's habits: monitors, links and trap signals made in
-- callbacks reach handle_info; from.pid; a protocol no user message can mimic; timeout,
-- continue and hibernate returns; bad returns named; get_state / replace_state.
local smarm = require "smarm"
local gen_server = require "smarm.gen_server"
local gen_statem = require "smarm.gen_statem"

-- The next report of kind what from the test server (others dropped), within 5 s.
local function next_report(what)
   local m = smarm.recv(function(x) return type(x) == "table" and x.what == what end, 5)
   if m == nil then error("no " .. what .. " report", 2) end
   return m.v
end

local function start(args)
   args = args or {}
   args.report = smarm.self()
   return assert(gen_server.start("support.otp_server", args))
end

local function flush()
   while smarm.recv(0) ~= nil do end
end

describe("gen_server with OTP habits", function()
   before_each(flush)

   it("hands a monitor's down notice to handle_info with the monitor's ref", function()
      local srv = start()
      local target = smarm.spawn(function() require("smarm").recv() end)
      local ref = gen_server.call(srv, { "monitor", target })
      assert.is_number(ref)
      smarm.kill(target)
      local down = next_report("info")
      assert.are.same({ target, "killed", ref }, { down.pid, down.reason, down.ref })
      -- spawn_monitor in a callback too
      local r = gen_server.call(srv, { "spawn_monitor" })
      smarm.kill(r[1])
      local d2 = next_report("info")
      assert.are.same({ r[1], r[2] }, { d2.pid, d2.ref })
      gen_server.stop(srv)
   end)

   it("hears nothing of a monitor a callback removed", function()
      local srv = start()
      local target = smarm.spawn(function() require("smarm").recv() end)
      assert.is_true(gen_server.call(srv, { "demonitor", target }))
      smarm.kill(target)
      assert.is_nil(smarm.recv(function(x) return type(x) == "table" end, 0.1))
      gen_server.stop(srv)
   end)

   it("takes exit signals once a callback traps, from links it made", function()
      local srv = start()
      local child = gen_server.call(srv, { "trap_and_link" })
      smarm.send(child, "die")
      local sig = next_report("info")
      assert.are.equal(child, sig.pid)
      assert.are.equal("error", sig.reason)
      assert.are.equal("ok", gen_server.call(srv, { "reply_timeout" }))
      gen_server.stop(srv)
   end)

   it("finds a call's reply without touching a long inbox, which stays in order", function()
      local srv = start()
      local me = smarm.self()
      for i = 1, 20000 do smarm.send(me, i) end
      assert.are.equal(me, gen_server.call(srv, { "whoami" }))
      for i = 1, 20000 do assert.are.equal(i, smarm.recv(0)) end
      assert.is_nil(smarm.recv(0))
      gen_server.stop(srv)
   end)

   it("gives handle_call the caller's pid as from.pid", function()
      local srv = start()
      assert.are.equal(smarm.self(), gen_server.call(srv, { "whoami" }))
      gen_server.stop(srv)
   end)

   it("takes a user message shaped like the protocol for an info message", function()
      local srv = start()
      local mon = smarm.monitor(srv)
      smarm.send(srv, { smarm = "stop", reason = "normal" })
      assert.are.equal("stop", next_report("info").smarm)
      smarm.send(srv, { smarm = "call", req = { "whoami" } })
      assert.are.equal("call", next_report("info").smarm)
      assert.are.same({ nil, "timeout" }, { mon:recv(0.05) })
      assert.are.equal(smarm.self(), gen_server.call(srv, { "whoami" }))
      gen_server.stop(srv)
   end)

   it("calls handle_info(\"timeout\") when nothing comes within a returned timeout", function()
      local srv = start()
      assert.are.equal("ok", gen_server.call(srv, { "reply_timeout", 0.02 }))
      assert.are.equal("timeout", next_report("info"))
      -- a message that arrives in time cancels it
      assert.are.equal("ok", gen_server.call(srv, { "reply_timeout", 0.3 }))
      gen_server.cast(srv, "tick")
      assert.are.equal(1, gen_server.call(srv, { "get" }))
      assert.is_nil(smarm.recv(function(x) return type(x) == "table" end, 0.4))
      -- noreply with a timeout: the caller gets no reply, the server times out
      assert.are.same({ nil, "timeout" }, { gen_server.call(srv, { "noreply_timeout", 0.02 },
         0.2) })
      assert.are.equal("timeout", next_report("info"))
      gen_server.stop(srv)
   end)

   it("runs handle_continue before the next message", function()
      local srv = start({ continue = true })
      assert.are.equal("from_init", next_report("continue"))
      gen_server.call(srv, { "continue", "x1" })
      assert.are.equal("x1", next_report("continue"))
      gen_server.stop(srv)
   end)

   it("accepts hibernate and goes on serving", function()
      local srv = start()
      assert.are.equal("ok", gen_server.call(srv, { "hibernate" }))
      assert.are.equal(smarm.self(), gen_server.call(srv, { "whoami" }))
      gen_server.stop(srv)
   end)

   it("fails on an unknown return, naming the callback and the value", function()
      for _, case in ipairs({
         { function(s) return gen_server.call(s, { "bad" }, 1) end, "handle_call: bogus" },
         { function(s) return gen_server.cast(s, "bad") end, "handle_cast: table" },
         { function(s) return gen_server.call(s, { "bad_extra" }, 1) end, "got soon" },
      }) do
         local srv = start()
         local mon = smarm.monitor(srv)
         case[1](srv)
         local down = assert(mon:recv(5))
         assert.are.equal("error", down.reason)
         assert.matches(case[2], down.error, 1, true)
      end
   end)

   it("shows and replaces its state", function()
      local srv = start()
      gen_server.cast(srv, "tick")
      local st = gen_server.get_state(srv)
      assert.are.equal(1, st.n)
      local new = gen_server.replace_state(srv, function(s)
         s.n = s.n + 10
         return s
      end)
      assert.are.equal(11, new.n)
      assert.are.equal(11, gen_server.call(srv, { "get" }))
      local k = 5
      assert.has_error(function() gen_server.replace_state(srv, function(s) return k + s end) end,
         "gen_server.replace_state: fn must have no upvalues (it runs in the server)")
      assert.matches("boom", select(2, pcall(gen_server.replace_state, srv, function()
         error("boom")
      end)))
      assert.are.equal(11, gen_server.get_state(srv).n)
      assert.are.same({ nil, "noproc" }, { gen_server.get_state("no such name") })
      gen_server.stop(srv)
   end)
end)

describe("gen_statem with OTP habits", function()
   it("keeps state and data, repeats a state's enter call, shows its state", function()
      local m = assert(gen_statem.start("support.otp_machine", { report = smarm.self() }))
      assert.are.equal(1, next_report("enter"))
      assert.are.equal("same", gen_statem.call(m, "keep"))
      assert.are.equal("again", gen_statem.call(m, "repeat"))
      assert.are.equal(2, next_report("enter"))
      local st = gen_statem.get_state(m)
      assert.are.same({ "idle", { report = smarm.self(), enters = 2 } }, st)
      local new = gen_statem.replace_state(m, function(sd)
         sd[2].enters = 10
         return sd
      end)
      assert.are.equal(10, new[2].enters)
      assert.are.equal(10, gen_statem.get_state(m)[2].enters)
      assert.matches("must return {state, data}",
         select(2, pcall(gen_statem.replace_state, m, function() return 1 end)))
      -- a user message shaped like the protocol is an info event, not a stop
      smarm.send(m, { smarm = "stop", reason = "normal" })
      assert.are.equal("same", gen_statem.call(m, "keep"))
      gen_statem.stop(m)
   end)
end)
