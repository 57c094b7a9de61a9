-- Bad input gets an error that names the function and the problem, one rule per kind of
-- argument (timeouts, pids, messages, exit reasons).
local smarm = require "smarm"

-- Asserts that e contains expected, as plain text.
local function has(expected, e) assert.matches(expected, e, 1, true) end

-- The error raised by f(...), which must raise.
local function err_of(f, ...)
   local ok, e = pcall(f, ...)
   assert.is_false(ok, "expected an error")
   return tostring(e)
end

describe("errors", function()
   it("name the function even when it is called through a local", function()
      local sleep, send, select = smarm.sleep, smarm.send, smarm.select
      has("smarm.sleep: seconds must be a number, got no value", err_of(sleep))
      has("smarm.send: a message expected (argument 2)", err_of(send, smarm.self()))
      has("smarm.select: arms must be a table, got no value", err_of(select))
      local tx = smarm.channel()
      has("tx:send: a value expected", err_of(tx.send, tx))
      has("smarm.send_after: a message expected (argument 3)",
         err_of(smarm.send_after, 1, smarm.self()))
   end)

   it("follow one rule for every timeout: a number of seconds, not negative, not NaN", function()
      local nan = 0 / 0
      for _, f in ipairs({
         { "smarm.recv", smarm.recv }, { "smarm.sleep", smarm.sleep },
         { "smarm.send_after", smarm.send_after },
      }) do
         has(f[1] .. ": timeout must not be negative", err_of(f[2], -1))
         has(f[1] .. ": timeout must be a number of seconds, got nan", err_of(f[2], nan))
         has(f[1] .. ": timeout must be a number of seconds, got string", err_of(f[2], "1"))
      end
      local _, rx = smarm.channel()
      has("rx:recv: timeout must be a number of seconds, got nan", err_of(rx.recv, rx, nan))
      has("smarm.select: timeout must not be negative", err_of(smarm.select, { rx }, -1))
      -- zero polls everywhere, sleep(0) included
      assert.are.same({ nil, "timeout" }, { smarm.recv(0) })
      assert.is_nil(smarm.sleep(0))
   end)

   it("call a number that cannot be a pid of this runtime a bad pid, not dead", function()
      local beyond = 2 ^ 24 + 2 ^ 23 -- generation 1, an index past the default slab
      for _, f in ipairs({ "send", "link", "monitor", "kill", "shutdown", "pid_tostring" }) do
         local e = err_of(smarm[f], beyond, "x")
         has("smarm." .. f .. ": bad pid (", e)
         has("is not a pid of this runtime", e)
      end
      has("smarm.send: bad pid (5 is not a pid of this runtime)", err_of(smarm.send, 5, 1))
      has("smarm.send: bad pid (1.5 is not a pid)", err_of(smarm.send, 1.5, 1))
      -- still alive: none of these killed the caller
      local dead = smarm.spawn(function() end)
      require("support.inbox").wait_dead(dead)
      assert.are.same({ nil, "dead" }, { smarm.send(dead, 1) })
   end)

   it("refuse an unsendable exit reason at smarm.exit, as send does", function()
      local function ends_with(reason_maker)
         local _, mon = smarm.spawn_monitor(function(kind)
            local s = require "smarm"
            local r
            if kind == "function" then r = print
            elseif kind == "cycle" then r = {}; r.self = r
            else local tx = s.channel(); r = { tx } end
            s.exit(r)
         end, reason_maker)
         return assert(mon:recv(5))
      end
      local d = ends_with("function")
      assert.are.equal("error", d.reason)
      has("smarm.exit: cannot send a function (at reason)", d.error)
      d = ends_with("cycle")
      has("smarm.exit: cannot send a cyclic table (at reason.self)", d.error)
      d = ends_with("channel")
      has("smarm.exit: a reason cannot carry channel endpoints", d.error)
   end)

   it("reject an unknown spawn_opt option and a non-table of options", function()
      local f = function() end
      has("smarm.spawn_opt: unknown option stak", err_of(smarm.spawn_opt, { stak = 1 }, f))
      has("smarm.spawn_opt: options must be a table, got nil", err_of(smarm.spawn_opt, nil, f))
   end)
end)
