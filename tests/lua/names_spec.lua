-- The registry (one live actor per name, one name per actor) and process groups.
local smarm = require "smarm"

local function idler()
   local s = require "smarm"
   while true do
      local m = s.recv()
      if type(m) == "table" and m.reply then s.send(m.reply, m.v) end
   end
end

local wait_dead = require("support.inbox").wait_dead

describe("registry", function()
   it("resolves a name to its live holder and sends through it", function()
      local p = smarm.spawn(idler)
      assert.is_true(smarm.register("names_spec.echo", p))
      assert.are.equal(p, smarm.whereis("names_spec.echo"))
      assert.is_true(smarm.send("names_spec.echo", { reply = smarm.self(), v = 42 }))
      assert.are.equal(42, smarm.recv(5))
      smarm.kill(p)
   end)

   it("refuses a name held by a live actor, and a second name for one actor", function()
      local a, b = smarm.spawn(idler), smarm.spawn(idler)
      assert.is_true(smarm.register("names_spec.one", a))
      assert.is_true(smarm.register("names_spec.one", a)) -- the same binding again
      assert.are.same({ nil, "taken" }, { smarm.register("names_spec.one", b) })
      assert.are.same({ nil, "already_named" }, { smarm.register("names_spec.two", a) })
      smarm.kill(a)
      smarm.kill(b)
   end)

   it("releases the names of dead actors so a new tenant can take them", function()
      local a = smarm.spawn(idler)
      assert.is_true(smarm.register("names_spec.heal", a))
      smarm.kill(a)
      assert.is_true(wait_dead(a))
      assert.is_nil(smarm.whereis("names_spec.heal"))
      assert.are.same({ nil, "unresolved" }, { smarm.send("names_spec.heal", 1) })
      local b = smarm.spawn(idler)
      assert.is_true(smarm.register("names_spec.heal", b))
      assert.are.equal(b, smarm.whereis("names_spec.heal"))
      smarm.kill(b)
   end)

   it("unregisters", function()
      local a = smarm.spawn(idler)
      assert.is_true(smarm.register("names_spec.gone", a))
      assert.is_true(smarm.unregister("names_spec.gone"))
      assert.is_false(smarm.unregister("names_spec.gone"))
      assert.is_nil(smarm.whereis("names_spec.gone"))
      smarm.kill(a)
   end)

   it("never redirects a send to a stale pid to the slot's next tenant", function()
      local old = smarm.spawn(function() end)
      assert.is_true(wait_dead(old))
      -- churn until some new actor takes the old slot
      local idx = smarm.pid_tostring(old):match("<0%.(%d+)%.")
      local tenant
      for _ = 1, 2000 do
         local p = smarm.spawn(idler)
         if smarm.pid_tostring(p):match("<0%.(%d+)%.") == idx then tenant = p break end
         smarm.kill(p)
      end
      assert.is_number(tenant)
      assert.are.same({ nil, "dead" }, { smarm.send(old, { reply = smarm.self(), v = "wrong" }) })
      assert.are.same({ nil, "timeout" }, { smarm.recv(0.05) })
      smarm.kill(tenant)
   end)

   it("spawn_opt names the new actor, and refuses a taken name", function()
      local p = smarm.spawn_opt({ name = "names_spec.born" }, idler)
      assert.are.equal(p, smarm.whereis("names_spec.born"))
      assert.are.same({ nil, "taken" }, { smarm.spawn_opt({ name = "names_spec.born" }, idler) })
      smarm.kill(p)
   end)

   it("rejects names that are not strings", function()
      local ok, err = pcall(smarm.register, 42)
      assert.is_false(ok)
      assert.matches("smarm.register: a name must be a string", err)
   end)
end)

describe("process groups", function()
   it("are multisets of live members", function()
      local a, b = smarm.spawn(idler), smarm.spawn(idler)
      smarm.pg.join("names_spec.g", a)
      smarm.pg.join("names_spec.g", a)
      smarm.pg.join("names_spec.g", b)
      local m = smarm.pg.members("names_spec.g")
      table.sort(m)
      local expect = { a, a, b }
      table.sort(expect)
      assert.are.same(expect, m)
      assert.is_true(smarm.pg.leave("names_spec.g", a))
      assert.are.equal(2, #smarm.pg.members("names_spec.g"))
      smarm.kill(a)
      assert.is_true(wait_dead(a))
      assert.are.same({ b }, smarm.pg.members("names_spec.g"))
      assert.are.equal(b, smarm.pg.pick("names_spec.g"))
      assert.are.equal(b, smarm.pg.dispatch("names_spec.g", { reply = smarm.self(), v = "hi" }))
      assert.are.equal("hi", smarm.recv(5))
      smarm.kill(b)
      assert.is_true(wait_dead(b))
      assert.are.same({ nil, "no_member" }, { smarm.pg.dispatch("names_spec.g", 1) })
      assert.is_nil(smarm.pg.pick("names_spec.g"))
   end)

   it("stay live under churn on every scheduler", function()
      local function churner(parent, k)
         local s = require "smarm"
         for i = 1, 200 do
            local p = s.spawn(function(wait)
               local s2 = require "smarm"
               s2.pg.join("names_spec.churn")
               s2.recv(wait)
            end, 0.001 * (i % 3))
            assert(p)
            for _, m in ipairs(s.pg.members("names_spec.churn")) do
               -- every member listed is alive or was alive a moment ago: its info
               -- may be gone, but never another actor's
               assert(type(m) == "number")
            end
         end
         s.send(parent, k)
      end
      for k = 1, 4 do smarm.spawn(churner, smarm.self(), k) end
      for _ = 1, 4 do assert.is_number(smarm.recv(30)) end
      -- the last members end within milliseconds of running (a loaded box may run them
      -- late): the group empties as they end, and stays empty
      local left
      for _ = 1, 500 do
         left = smarm.pg.members("names_spec.churn")
         if #left == 0 then break end
         smarm.sleep(0.01)
      end
      assert.are.same({}, left)
   end)
end)
