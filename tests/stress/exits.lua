-- exits: a population of members that, each for a few random rounds, spawn leaves (spawn,
-- spawn_link, spawn_monitor), link / unlink / monitor / demonitor / kill / shutdown their
-- peers, toggle trap_exit, register / unregister / whereis names and send to them, join and
-- leave process groups and read them, then end a random way (return, smarm.exit() or with
-- a reason, an error). The root spawns every member linked and monitored (spawn_opt, some
-- named), traps exits, and keeps the population topped up; watcher actors hold more
-- monitors of members and demonitor some of them.
-- Checks: every monitor gets exactly one down notice, with the right pid, then "closed";
-- demonitored ones get none; every reason is one the test explains, and every monitor of a
-- pid agrees with the root's (or says noproc); the root gets exactly one exit signal per
-- linked member that ended abnormally, with the same reason; a name or group lists only
-- actors that took it and are alive or leave it promptly after dying; a probe sent by name
-- or to a group member reaches an actor that held the name / joined the group; at the end
-- no name is held, every group is empty and no actor is left.
-- Usage: smarm-lua -S 2 tests/stress/exits.lua [small|large] [seed]

-- A member: rounds of random actions, then its fate. Anything wrong it sees goes to root
-- as {bad = text} at once (it may be killed any moment).
local function member(root, seed, peers, names, groups, start_name)
   -- A leaf: lives a moment, then ends normally or with a reason (never an error).
   local function leaf(how, wait)
      local smarm = require "smarm"
      if wait > 0 then
         smarm.sleep(wait)
      end
      if how == 1 then
         smarm.exit({ exits = "leaf" })
      elseif how == 2 then
         smarm.exit()
      end
   end
   local smarm = require "smarm"
   math.randomseed(seed)
   local me = smarm.self()
   local EXPLAINED = { normal = true, killed = true, shutdown = true, error = true,
      noproc = true }
   local TAGS = { fate = true, leaf = true, trapped = true }
   local function explained(r)
      if type(r) == "table" then
         return TAGS[r.exits] == true
      end
      return EXPLAINED[r] == true
   end
   local function bad(fmt, ...)
      smarm.send(root, { bad = ("member %s: " .. fmt):format(smarm.pid_tostring(me), ...) })
   end
   local held = {} -- names this member ever held
   local myname = start_name
   if start_name then
      held[start_name] = true
      -- spawn_opt holds the name before the actor runs (tests/lua/spawn_opt_name_spec.lua)
      if smarm.whereis(start_name) ~= me then
         bad("started without its name %s", start_name)
      end
   end
   local joined, joined_ever = {}, {} -- group -> memberships now; group -> true
   local mons = {} -- {pid, mon, demonitored}
   local trap_rx
   local leaves = 0

   local function handle(m)
      if type(m) ~= "table" then
         return
      end
      if m.probe_name and not held[m.probe_name] then
         bad("a send to name %s reached me, which never held it", m.probe_name)
      elseif m.probe_group and not joined_ever[m.probe_group] then
         bad("a probe for group %s reached me, which never joined it", m.probe_group)
      end
   end
   local function check_mons()
      for i = #mons, 1, -1 do
         local e = mons[i]
         local d, why = e.mon:recv(0)
         if e.demonitored then
            -- none, even when the demonitor raced the death (tests/lua/monitor_race_spec.lua)
            if d ~= nil or why ~= "closed" then
               bad("a demonitored monitor gave %s %s", tostring(d), tostring(why))
            end
            table.remove(mons, i)
         elseif d ~= nil then
            if d.pid ~= e.pid then
               bad("down notice for %s on a monitor of %s", tostring(d.pid), e.pid)
            end
            if not explained(d.reason) then
               bad("unexplained down reason %s", tostring(d.reason))
            end
            local d2, why2 = e.mon:recv(0) -- closed as soon as the notice is read
            if d2 ~= nil or why2 ~= "closed" then
               bad("a second notice on a monitor: %s %s", tostring(d2), tostring(why2))
            end
            table.remove(mons, i)
         elseif why ~= "timeout" then
            bad("a live monitor said %s", tostring(why))
         end
      end
   end
   -- pid is listed under key (a name or group); true if it is alive and lists it, or it
   -- drops out of the listing promptly
   local function settles(pid, listed, holds)
      for _ = 1, 400 do
         if not listed() then
            return true
         end
         local info = smarm.info(pid)
         if info and holds(info) then
            return true
         end
         smarm.sleep(0.0005)
      end
      return false
   end
   local function target()
      if #peers > 0 then
         return peers[math.random(#peers)]
      end
   end

   local ACTIONS = {
      function() -- spawn a leaf, one of three ways
         if leaves >= 2 then
            return
         end
         leaves = leaves + 1
         local how, wait = math.random(0, 2), math.random(0, 2) * 0.0005
         local k = math.random(3)
         if k == 1 then
            peers[#peers + 1] = smarm.spawn(leaf, how, wait)
         elseif k == 2 then
            smarm.spawn_link(leaf, how, wait)
         else
            local pid, mon = smarm.spawn_monitor(leaf, how, wait)
            mons[#mons + 1] = { pid = pid, mon = mon }
         end
      end,
      function() -- link to a peer (noproc if dead: fatal unless trapping)
         local p = target()
         if p and math.random(4) == 1 then
            smarm.link(p)
         end
      end,
      function()
         local p = target()
         if p then
            smarm.unlink(p)
         end
      end,
      function() -- monitor a peer
         local p = target()
         if p then
            mons[#mons + 1] = { pid = p, mon = smarm.monitor(p) }
         end
      end,
      function() -- demonitor one
         if #mons > 0 then
            local e = mons[math.random(#mons)]
            if not e.demonitored then
               smarm.demonitor(e.mon)
               e.demonitored = true
            end
         end
      end,
      function() -- kill or shut down a peer, now and then
         local p = target()
         if p and math.random(3) == 1 then
            if math.random(2) == 1 then
               smarm.kill(p)
            else
               smarm.shutdown(p)
            end
         end
      end,
      function() -- trap exits, or stop
         if trap_rx then
            local old = smarm.trap_exit(false) -- keeps what had arrived, then closed
            local v, why = old:recv(0)
            while v ~= nil do
               if not explained(v.reason) then
                  bad("exit signal with reason %s", tostring(v.reason))
               end
               v, why = old:recv(0)
            end
            if why ~= "closed" then
               bad("the old trap receiver said %s", tostring(why))
            end
            trap_rx = nil
         else
            trap_rx = smarm.trap_exit(true)
         end
      end,
      function() -- register a name
         local n = names[math.random(#names)]
         local ok, why = smarm.register(n)
         if ok then
            if myname and myname ~= n then
               bad("registered %s while holding %s", n, myname)
            end
            myname = n
            held[n] = true
         elseif why == "already_named" then
            if not myname or myname == n then
               bad("register %s: already_named, holding %s", n, tostring(myname))
            end
         elseif why ~= "taken" then
            bad("register %s: %s", n, tostring(why))
         end
      end,
      function() -- unregister my name (only holders unregister, so it must work)
         if myname then
            if not smarm.unregister(myname) then
               bad("unregister %s failed for its holder", myname)
            end
            if smarm.whereis(myname) == me then
               bad("still %s after unregistering it", myname)
            end
            myname = nil
         end
      end,
      function() -- whereis and send by name
         local n = names[math.random(#names)]
         local p = smarm.whereis(n)
         if p == me then
            if myname ~= n then
               bad("whereis %s is me, holding %s", n, tostring(myname))
            end
         elseif p then
            if not settles(p, function() return smarm.whereis(n) == p end,
                  function(info) return info.name == n end) then
               bad("name %s stays on %s, dead or named %s", n, smarm.pid_tostring(p),
                  tostring((smarm.info(p) or {}).name))
            end
            peers[#peers + 1] = p
         elseif myname == n then
            bad("whereis %s is nil while I hold it", n)
         end
         local ok, why = smarm.send(n, { probe_name = n })
         if not ok and why ~= "unresolved" and why ~= "dead" then
            bad("send to name %s: %s", n, tostring(why))
         end
      end,
      function() -- join or leave a group
         local g = groups[math.random(#groups)]
         if (joined[g] or 0) > 0 and math.random(2) == 1 then
            if not smarm.pg.leave(g) then
               bad("leave %s failed with %d memberships", g, joined[g])
            end
            joined[g] = joined[g] - 1
         else
            joined_ever[g] = true
            if not smarm.pg.join(g) then
               bad("join %s failed for a live actor", g)
            end
            joined[g] = (joined[g] or 0) + 1
         end
      end,
      function() -- read a group: me as often as I joined; others alive or gone promptly
         local g = groups[math.random(#groups)]
         local mine = 0
         for _, p in ipairs(smarm.pg.members(g)) do
            if p == me then
               mine = mine + 1
            else
               local function listed()
                  for _, q in ipairs(smarm.pg.members(g)) do
                     if q == p then
                        return true
                     end
                  end
                  return false
               end
               if not settles(p, listed, function() return true end) then
                  bad("dead %s stays in group %s", smarm.pid_tostring(p), g)
               end
               smarm.send(p, { probe_group = g })
               if math.random(4) == 1 then
                  peers[#peers + 1] = p
               end
            end
         end
         if mine ~= (joined[g] or 0) then
            bad("group %s lists me %d times, I joined %d", g, mine, joined[g] or 0)
         end
      end,
      function() -- read the inbox, the trap receiver and the monitors
         for _ = 1, 4 do
            local m = smarm.recv(0)
            if m == nil then
               break
            end
            handle(m)
         end
         if trap_rx then
            local sig = trap_rx:recv(0)
            if sig then
               if type(sig.from) ~= "number" or not explained(sig.reason) then
                  bad("exit signal from %s, reason %s", tostring(sig.from),
                     tostring(sig.reason))
               end
               if sig.request and sig.reason == "shutdown" and math.random(2) == 1 then
                  smarm.exit({ exits = "trapped" })
               end
            end
         end
         check_mons()
      end,
      function()
         smarm.yield()
      end,
      function()
         smarm.sleep(math.random(0, 3) * 0.0002)
      end,
   }
   for _ = 1, math.random(2, 25) do
      ACTIONS[math.random(#ACTIONS)]()
   end
   check_mons()
   local fate = math.random(5)
   if fate == 1 then
      error("exits: member fails on purpose")
   elseif fate == 2 then
      smarm.exit({ exits = "fate", seed = seed })
   elseif fate == 3 then
      smarm.exit()
   end
end

-- A watcher: monitors the members root tells it of (some twice), demonitors some, and at
-- the end reports every notice it got.
local function watcher(root, seed)
   local smarm = require "smarm"
   math.randomseed(seed)
   local active, reasons, late = {}, {}, {}
   local made, fired, demonitored, noproc = 0, 0, 0, 0
   local failure
   local function fail(fmt, ...)
      failure = failure or fmt:format(...)
   end
   local function take(e, d)
      if d.pid ~= e.pid then
         fail("notice for %s on a monitor of %s", tostring(d.pid), e.pid)
      end
      local d2, why2 = e.mon:recv(0) -- closed as soon as the notice is read
      if d2 ~= nil or why2 ~= "closed" then
         fail("a second notice: %s %s", tostring(d2), tostring(why2))
      end
      fired = fired + 1
      if d.reason == "noproc" then
         noproc = noproc + 1
      else
         local list = reasons[e.pid] or {}
         list[#list + 1] = d.reason
         reasons[e.pid] = list
      end
   end
   local function poll()
      for i = #active, 1, -1 do
         local e = active[i]
         local d, why = e.mon:recv(0)
         if d then
            take(e, d)
            table.remove(active, i)
         elseif why ~= "timeout" then
            fail("a live monitor said %s", tostring(why))
         end
      end
   end
   while true do
      local m = smarm.recv(0.002)
      if m and m.stop then
         break
      elseif m then
         for _ = 1, math.random(2) do
            active[#active + 1] = { pid = m.watch, mon = smarm.monitor(m.watch) }
            made = made + 1
         end
         if #active > 0 and math.random(4) == 1 then
            local i = math.random(#active)
            local e = table.remove(active, i)
            smarm.demonitor(e.mon)
            demonitored = demonitored + 1
            local d, why = e.mon:recv(0)
            if d ~= nil or why ~= "closed" then
               fail("a demonitored monitor gave %s %s", tostring(d), tostring(why))
            end
            late[#late + 1] = e
         end
      end
      poll()
   end
   -- every member has ended: each remaining monitor has its notice
   for _, e in ipairs(active) do
      local d, why = e.mon:recv(10)
      if d then
         take(e, d)
      else
         fail("no notice on a monitor of %s: %s", smarm.pid_tostring(e.pid), tostring(why))
      end
   end
   -- demonitored ones stay silent, even those whose target was dying at the time
   for _, e in ipairs(late) do
      local d, why = e.mon:recv(0.01)
      if d ~= nil or why ~= "closed" then
         fail("a demonitored monitor gave %s %s", tostring(d), tostring(why))
      end
   end
   smarm.send(root, { watcher = seed, reasons = reasons, made = made, fired = fired,
      demonitored = demonitored, noproc = noproc, failure = failure })
end

local smarm = require "smarm"
local common = require "common"

local function same(a, b)
   if type(a) ~= "table" or type(b) ~= "table" then
      return a == b
   end
   for k, v in pairs(a) do
      if not same(v, b[k]) then
         return false
      end
   end
   for k in pairs(b) do
      if a[k] == nil then
         return false
      end
   end
   return true
end

local function show(r)
   if type(r) ~= "table" then
      return tostring(r)
   end
   local parts = {}
   for k, v in pairs(r) do
      parts[#parts + 1] = tostring(k) .. "=" .. tostring(v)
   end
   table.sort(parts)
   return "{" .. table.concat(parts, ",") .. "}"
end

local function run(size, seed)
   local total = size == "large" and 50000 or 5000
   local population = size == "large" and 200 or 64
   local nwatchers = 4
   math.randomseed(seed)

   local t0 = smarm.now()
   local me = smarm.self()
   local prefix = ("exits.%d."):format(seed)
   local names, groups = {}, {}
   for i = 1, 8 do
      names[i] = prefix .. "n" .. i
   end
   for i = 1, 3 do
      groups[i] = prefix .. "g" .. i
   end
   local watchers = {}
   for i = 1, nwatchers do
      watchers[i] = smarm.spawn(watcher, me, seed * 100 + i)
   end

   local trap = smarm.trap_exit(true)
   local mons, by_mon = {}, {} -- live members' monitors; monitor -> pid
   local ledger = {} -- pid -> down notice
   local recent = {}
   local spawned, ended, named = 0, 0, 0
   local linked = {} -- pid -> spawned linked to the root
   local signals, bads = {}, {}
   local function spawn_one()
      spawned = spawned + 1
      local peers = {}
      for k = 1, math.min(#recent, 5) do
         peers[k] = recent[math.random(#recent)]
      end
      local opts = { link = true, monitor = true }
      local name
      if math.random(4) == 1 then
         name = names[math.random(#names)]
         opts.name = name
      end
      local s = seed * 1000003 + spawned
      local pid, mon = smarm.spawn_opt(opts, member, me, s, peers, names, groups, name)
      if pid then
         linked[pid] = opts.link
      end
      if not pid then
         common.check(mon == "taken", "spawn_opt with a name: %s", tostring(mon))
         opts.name = nil
         pid, mon = smarm.spawn_opt(opts, member, me, s, peers, names, groups)
         linked[pid] = true
      else
         named = named + (name and 1 or 0)
      end
      mons[#mons + 1] = mon
      by_mon[mon] = pid
      recent[(spawned - 1) % 50 + 1] = pid
      if math.random(2) == 1 then
         smarm.send(watchers[math.random(nwatchers)], { watch = pid })
      end
   end
   local function on_signal(sig)
      common.check(signals[sig.from] == nil, "two exit signals from %s",
         smarm.pid_tostring(sig.from))
      signals[sig.from] = sig.reason
   end

   for _ = 1, population do
      spawn_one()
   end
   while ended < total do
      local arms = { smarm.inbox, trap }
      for i, mon in ipairs(mons) do
         arms[i + 2] = mon
      end
      local i, v, why = smarm.select(arms, 60)
      common.check(i ~= nil, "nothing for 60 s (%d of %d ended)", ended, total)
      if i == 1 then
         bads[#bads + 1] = v.bad
      elseif i == 2 then
         on_signal(v)
      else
         local mon = arms[i]
         local pid = by_mon[mon]
         common.check(v ~= nil, "the root's monitor of %s: %s", smarm.pid_tostring(pid),
            tostring(why))
         common.check(v.pid == pid, "notice for %s on the monitor of %s", tostring(v.pid), pid)
         common.check(ledger[pid] == nil, "two notices for %s", smarm.pid_tostring(pid))
         local v2, why2 = mon:recv(0) -- closed as soon as the notice is read
         common.check(v2 == nil and why2 == "closed", "a second notice on a monitor: %s %s",
            tostring(v2), tostring(why2))
         ledger[pid] = v
         ended = ended + 1
         table.remove(mons, i - 2)
         by_mon[mon] = nil
         if spawned < total then
            spawn_one()
         end
      end
   end
   common.check(#bads == 0, "%d failures seen by members, first: %s", #bads, tostring(bads[1]))
   common.wait_others(nwatchers)

   -- the ledger: every reason explained; the crash reports to expect
   local kinds = {}
   local crashes, abnormal = 0, 0
   for pid, d in pairs(ledger) do
      local r, kind = d.reason, nil
      if type(r) == "table" then
         kind = r.exits and ("exit " .. r.exits)
      elseif r == "error" then
         kind = d.error and "error" or "error (linked)"
         crashes = crashes + (d.error and 1 or 0)
      elseif r == "normal" or r == "killed" or r == "shutdown" or r == "noproc" then
         kind = r
      end
      common.check(kind ~= nil, "unexplained reason %s of %s", show(r), smarm.pid_tostring(pid))
      kinds[kind] = (kinds[kind] or 0) + 1
      if r ~= "normal" and linked[pid] then
         abnormal = abnormal + 1
      end
   end
   -- exit signals: exactly one per abnormal end, with the same reason
   local deadline = smarm.now() + 10
   local nsignals = 0
   for _ in pairs(signals) do
      nsignals = nsignals + 1
   end
   while nsignals < abnormal and smarm.now() < deadline do
      local sig = trap:recv(0.01)
      if sig then
         on_signal(sig)
         nsignals = nsignals + 1
      end
   end
   for pid, r in pairs(signals) do
      local d = ledger[pid]
      common.check(d and same(d.reason, r), "exit signal %s from %s, its down notice %s",
         show(r), smarm.pid_tostring(pid), d and show(d.reason) or "none")
   end
   common.check(nsignals == abnormal, "%d exit signals for %d abnormal ends", nsignals, abnormal)
   smarm.trap_exit(false)
   common.check(({ trap:recv(0) })[2] == "closed", "the trap receiver is not closed")

   -- the watchers: one notice per monitor they kept, agreeing with the root's
   for i = 1, nwatchers do
      smarm.send(watchers[i], { stop = true })
   end
   local made, fired, demon, noproc = 0, 0, 0, 0
   for _ = 1, nwatchers do
      local m = smarm.recv(30)
      common.check(m ~= nil and m.watcher, "a watcher did not report")
      common.check(not m.failure, "watcher: %s", tostring(m.failure))
      for pid, list in pairs(m.reasons) do
         for _, r in ipairs(list) do
            common.check(ledger[pid] and same(ledger[pid].reason, r),
               "a watcher saw %s end with %s, the root with %s", smarm.pid_tostring(pid),
               show(r), ledger[pid] and show(ledger[pid].reason) or "nothing")
         end
      end
      made, fired, demon, noproc = made + m.made, fired + m.fired, demon + m.demonitored,
         m.noproc + noproc
   end
   common.check(fired + demon == made, "watchers: %d monitors, %d notices, %d demonitored",
      made, fired, demon)

   common.wait_others(0)
   for _, n in ipairs(names) do
      common.check(smarm.whereis(n) == nil, "name %s still held by %s", n,
         tostring((smarm.whereis(n))))
   end
   for _, g in ipairs(groups) do
      common.check(#smarm.pg.members(g) == 0, "group %s has %d members after the run", g,
         #smarm.pg.members(g))
   end
   local stray = smarm.recv(0)
   common.check(stray == nil, "a stray message for the root: %s", show(stray))

   local order = {}
   for k, n in pairs(kinds) do
      order[#order + 1] = ("%s %d"):format(k, n)
   end
   table.sort(order)
   return common.report("exits", t0,
      "%d members (%d named at spawn, %d alive at a time) ended with explained reasons (%s); "
         .. "%d exit signals match the abnormal ends; %d watcher monitors: %d notices agree "
         .. "with the root's (%d noproc), %d demonitored got none; names and groups held only "
         .. "by live takers, empty at the end; live=%d; expected_crashes=%d",
      total, named, population, table.concat(order, ", "), nsignals, made, fired, noproc, demon,
      common.others(), crashes)
end

return common.main("exits", run, ...)
