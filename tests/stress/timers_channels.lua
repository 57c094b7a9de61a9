-- timers_channels: timer actors arm send_after timers to themselves and to collectors (by
-- pid and by registered name) and cancel some of them at random moments, sleeping random
-- short durations meanwhile; hubs create two channels each and hand the tx ends to chains
-- of producers (each producer copies its tx on to the next in a message), select over both
-- rx ends, the inbox and a monitor of a producer with short timeouts, and move both rx ends
-- to a successor hub midway. Producers end by returning, by smarm.exit, by closing their
-- channel (tx:close) or by being killed; a channel closes when its last producer is gone.
-- Checks: every timer is exactly one of delivered / cancelled (cancel true), a cancelled
-- one never arrives, none twice, collectors' counts and checksums match; sleeps last at
-- least their duration; per-producer FIFO over moved rx ends, every value a producer sent
-- successfully arrives once (checksums), a killed producer's values form a prefix; each
-- rx ends "closed" (never a timeout once closed), the monitor gives one notice, and
-- nothing is left alive.
-- Usage: smarm-lua -S 2 tests/stress/timers_channels.lua [small|large] [seed]

-- Arms n timers (to itself, a collector's pid or a collector's name), cancels about half,
-- then settles the rest with cancel_timer, receives its own, and reports.
local function timer_actor(root, seed, n, collectors, names)
   local smarm = require "smarm"
   math.randomseed(seed)
   local me = smarm.self()
   local MOD = 2147483647
   local timers, cancelled, short = {}, 0, nil
   local to = {} -- timer index -> "self" or collector index
   local function sleep_check()
      local d = math.random(0, 20) * 0.0001
      local t0 = smarm.now()
      smarm.sleep(d)
      if smarm.now() - t0 < d and not short then
         short = ("sleep(%g) took %g"):format(d, smarm.now() - t0)
      end
   end
   local function try_cancel(i)
      if timers[i] and smarm.cancel_timer(timers[i]) then
         cancelled = cancelled + 1
         timers[i] = false -- cancelled
         return true
      end
   end
   for i = 1, n do
      local delay = math.random(0, 150) * 0.0001
      local k = math.random(3)
      local msg = { tc = seed, i = i }
      if k == 1 then
         to[i] = "self"
         timers[i] = smarm.send_after(delay, me, msg)
      else
         local c = math.random(#collectors)
         to[i] = c
         timers[i] = smarm.send_after(delay, k == 2 and collectors[c] or names[c], msg)
      end
      local r = math.random(6)
      if r == 1 then
         try_cancel(i)
      elseif r == 2 then
         try_cancel(math.random(i))
      elseif r == 3 then
         sleep_check()
      end
   end
   for _ = 1, math.random(0, math.floor(n / 4)) do
      sleep_check()
      try_cancel(math.random(n))
   end
   -- settle: a true cancel means it never fires; false means it fired (delivered)
   local want_self, per = {}, {}
   for i = 1, n do
      if timers[i] and not try_cancel(i) then
         if to[i] == "self" then
            want_self[i] = true
         else
            local p = per[to[i]] or { count = 0, sum = 0 }
            p.count = p.count + 1
            p.sum = (p.sum + seed * 1000 + i) % MOD
            per[to[i]] = p
         end
      end
   end
   local failure, nself = nil, 0
   for _ in pairs(want_self) do
      nself = nself + 1
   end
   for _ = 1, nself do
      local m = smarm.recv(10)
      if not m then
         failure = "a timer to self fired but never arrived"
         break
      elseif not want_self[m.i] or m.tc ~= seed then
         failure = ("unexpected or duplicate timer message %s"):format(tostring(m.i))
         break
      end
      want_self[m.i] = nil
   end
   smarm.sleep(0.02) -- past every delay: a cancelled or duplicated message would be here
   local extra = smarm.recv(0)
   if extra and not failure then
      failure = ("timer message %s after all fired ones"):format(tostring(extra.i))
   end
   smarm.send(root, { timers = seed, armed = n, cancelled = cancelled, per = per,
      failure = failure or short })
end

-- A collector: registers its name, then counts timer messages until root says how many.
local function collector(root, name)
   local smarm = require "smarm"
   local MOD = 2147483647
   assert(smarm.register(name))
   smarm.send(root, { ready = name })
   local count, sum, seen, want = 0, 0, {}, nil
   local failure
   while want == nil or count < want do
      -- the root sends the expected count only after every other part reported,
      -- which takes longer than the timers at the large size: wait as long as it does
      local m = smarm.recv(want == nil and 130 or 10)
      if not m then
         failure = ("%s: %d of %s timer messages"):format(name, count, tostring(want))
         break
      elseif m.expect then
         want = m.expect
      else
         local key = m.tc * 1000 + m.i
         if seen[key] and not failure then
            failure = ("%s: timer %d of %d twice"):format(name, m.i, m.tc)
         end
         seen[key] = true
         count = count + 1
         sum = (sum + key) % MOD
      end
   end
   smarm.sleep(0.01)
   if smarm.recv(0) ~= nil and not failure then
      failure = name .. ": a timer message beyond the expected count"
   end
   smarm.send(root, { collector = name, count = count, sum = sum, failure = failure })
end

-- A producer: gets its tx, copies it on to the next in its chain, streams n values
-- {id, seq, v} and ends its way; reports what it sent successfully.
local function producer(root, id, n, next_pid, fate)
   local smarm = require "smarm"
   local MOD = 2147483647
   local m = assert(smarm.recv(30), "producer: no tx")
   if next_pid then
      smarm.send(next_pid, { tx = m.tx })
   end
   local tx = m.tx
   local sent, sum, why = 0, 0, nil
   for seq = 1, n do
      local v = (seq * 2654435761 + id) % 4294967296
      local ok
      ok, why = tx:send({ id, seq, v })
      if not ok then
         break
      end
      sent, sum = seq, (sum * 33 + v) % MOD
      if seq % 50 == 0 then
         local d = (seq % 7) * 0.0001
         local t0 = smarm.now()
         smarm.sleep(d)
         assert(smarm.now() - t0 >= d, "a short sleep")
      end
      if fate == "close" and seq == math.floor(n / 2) then
         tx:close()
         why = "closed by me"
         break
      end
   end
   smarm.send(root, { prod = id, sent = sent, sum = sum, why = why })
   if fate == "exit" then
      smarm.exit({ tc = "producer" })
   elseif fate == "linger" then
      smarm.sleep(0.005)
   end
end

-- A hub: two channels whose tx ends go to two producer chains; selects until both are
-- closed and the monitor of chain A's first producer has fired; hands both rx ends and its
-- state to the spare hub after `handoff` values. The spare (chains nil) waits for them.
local function hub(root, hid, chains, handoff, spare)
   local smarm = require "smarm"
   local MOD = 2147483647
   local rx = {}
   local state
   if chains then
      state = { last = {}, sums = {}, counts = {}, timeouts = 0, handoffs = 0, got = 0,
         closed = {}, first = chains[1][1] }
      for c = 1, 2 do
         local tx
         tx, rx[c] = smarm.channel()
         smarm.send(chains[c][1], { tx = tx })
      end
      collectgarbage() -- drop this hub's own tx ends: only the producers hold them
      collectgarbage()
   else
      local m = assert(smarm.recv(60), "spare hub: no word")
      if m.none then
         return
      end
      rx, state = m.rx, m.state
      state.handoffs = state.handoffs + 1
   end
   local mon = smarm.monitor(state.first)
   local failure
   local function fail(fmt, ...)
      failure = failure or ("hub %d: " .. fmt):format(hid, ...)
   end
   local live_mon = true
   while not (state.closed[1] and state.closed[2]) or live_mon do
      local arms, which = { smarm.inbox }, { "inbox" }
      for c = 1, 2 do
         if not state.closed[c] then
            arms[#arms + 1], which[#arms + 1] = rx[c], c
         end
      end
      if live_mon then
         arms[#arms + 1], which[#arms + 1] = mon, "mon"
      end
      local i, v, why = smarm.select(arms, math.random(1, 5) * 0.001)
      if i == nil then -- nil, "timeout"
         if v ~= "timeout" then
            fail("select gave nil, %s", tostring(v))
         end
         state.timeouts = state.timeouts + 1
      elseif which[i] == "inbox" then
         fail("an inbox message %s", tostring(v))
      elseif which[i] == "mon" then
         if v == nil then
            fail("the monitor said %s before its notice", tostring(why))
         elseif v.pid ~= state.first then
            fail("notice for %s", tostring(v.pid))
         elseif not (v.reason == "normal" or v.reason == "noproc" or v.reason == "killed"
               or type(v.reason) == "table" and v.reason.tc == "producer") then
            fail("producer reason %s", tostring(v.reason))
         end
         live_mon = false
      elseif v == nil then
         if why ~= "closed" then
            fail("rx %d gave nil, %s", which[i], tostring(why))
         end
         state.closed[which[i]] = true
         local again = { smarm.select({ rx[which[i]] }, 1) }
         if again[1] ~= 1 or again[3] ~= "closed" then
            fail("a closed rx selected as %s %s", tostring(again[1]), tostring(again[3]))
         end
      else
         local id, seq, val = v[1], v[2], v[3]
         local want = (state.last[id] or 0) + 1
         if seq ~= want then
            fail("producer %d: seq %d, want %d", id, seq, want)
         end
         state.last[id] = seq
         state.counts[id] = (state.counts[id] or 0) + 1
         state.sums[id] = ((state.sums[id] or 0) * 33 + val) % MOD
         state.got = state.got + 1
         if spare and state.got == handoff and not (state.closed[1] or state.closed[2])
            and not failure and live_mon then
            -- move both rx ends to the spare; it makes its own monitor
            smarm.demonitor(mon)
            smarm.send(spare, { rx = rx, state = state })
            for c = 1, 2 do
               local ok = pcall(rx[c].recv, rx[c], 0)
               if ok then
                  fail("rx %d still receives after it was sent away", c)
               end
            end
            if failure then
               smarm.send(root, { hub = hid, failure = failure })
            end
            return
         end
      end
   end
   if spare then
      smarm.send(spare, { none = true })
   end
   if not failure then
      local i, why = smarm.select({ smarm.inbox }, 0.002)
      if i ~= nil or why ~= "timeout" then
         fail("an idle inbox selected as %s %s", tostring(i), tostring(why))
      end
   end
   smarm.send(root, { hub = hid, state = state, failure = failure })
end

local smarm = require "smarm"
local common = require "common"

local function run(size, seed)
   local nhubs = size == "large" and 400 or 40
   local per_chain = 2
   local nvalues = size == "large" and 5000 or 2000
   local ntimer_actors = size == "large" and 1000 or 100
   local ntimers = 60
   local ncollectors = 4
   math.randomseed(seed)
   local MOD = 2147483647

   local t0 = smarm.now()
   local me = smarm.self()
   local collectors, names = {}, {}
   for c = 1, ncollectors do
      names[c] = ("tc.%d.c%d"):format(seed, c)
      collectors[c] = smarm.spawn(collector, me, names[c])
   end
   for _ = 1, ncollectors do
      local m = smarm.recv(10)
      common.check(m and m.ready, "a collector did not start")
   end
   for k = 1, ntimer_actors do
      smarm.spawn(timer_actor, me, seed * 1000 + k, ntimers, collectors, names)
   end

   local producers, killable = {}, {}
   local FATES = { "return", "exit", "close", "linger" }
   local pid_of = {}
   for h = 1, nhubs do
      local chains = {}
      for c = 1, 2 do
         local chain, next_pid = {}, nil
         for j = per_chain, 1, -1 do
            local id = (h * 2 + c - 1) * 10 + j
            local fate = FATES[math.random(#FATES)]
            local n = math.random(math.floor(nvalues / 2), nvalues)
            next_pid = smarm.spawn(producer, me, id, n, next_pid, fate)
            chain[j] = next_pid
            producers[#producers + 1], pid_of[id] = id, next_pid
            if j == per_chain and math.random(3) == 1 then
               killable[#killable + 1] = id
            end
         end
         chains[c] = chain
      end
      local spare = smarm.spawn(hub, me, h, nil, nil, nil)
      smarm.spawn(hub, me, h, chains, math.random(1, nvalues), spare)
   end
   -- kill some chain tails while they stream
   local killed = {}
   for _, id in ipairs(killable) do
      smarm.sleep(math.random(0, 5) * 0.0002)
      smarm.kill(pid_of[id])
      killed[id] = true
   end

   local reports, hubs, timer_reports = {}, {}, {}
   local want = #producers + nhubs + ntimer_actors
   local got = 0
   local nkilled = 0
   for _ in pairs(killed) do
      nkilled = nkilled + 1
   end
   local deadline = smarm.now() + 120
   while got < want - nkilled do
      local m = smarm.recv(math.max(0, deadline - smarm.now()))
      common.check(m ~= nil, "timed out: %d of at least %d reports", got, want - nkilled)
      common.check(not m.failure, "%s", tostring(m.failure))
      if m.prod then
         reports[m.prod] = m
         if killed[m.prod] then
            nkilled = nkilled - 1 -- it finished before the kill
         end
      elseif m.hub then
         hubs[m.hub] = m.state
      elseif m.timers then
         timer_reports[#timer_reports + 1] = m
      end
      got = got + 1
   end
   -- a killed producer may have reported before it died: take what is there
   for id in pairs(killed) do
      while smarm.info(pid_of[id]) do
         smarm.sleep(0.001)
      end
   end
   while true do
      local m = smarm.recv(0)
      if not m then
         break
      end
      common.check(m.prod and killed[m.prod] and not reports[m.prod], "a stray report")
      reports[m.prod] = m
   end

   -- channels: everything sent successfully arrived once, in order
   local values, prefixes, closes = 0, 0, 0
   local handoffs, timeouts = 0, 0
   for h = 1, nhubs do
      local st = hubs[h]
      common.check(st ~= nil, "hub %d never reported", h)
      handoffs, timeouts = handoffs + st.handoffs, timeouts + st.timeouts
   end
   for _, id in ipairs(producers) do
      local h = math.floor(math.floor(id / 10) / 2)
      local st = hubs[h]
      local r = reports[id]
      local count = st.counts[id] or 0
      if r then
         common.check(count == r.sent, "producer %d sent %d, hub %d got %d", id, r.sent, h,
            count)
         common.check(count == 0 or st.sums[id] == r.sum, "producer %d: checksum %s, hub's %s",
            id, r.sum, tostring(st.sums[id]))
         if r.why == "closed by me" then
            closes = closes + 1
         end
      else
         common.check(killed[id], "producer %d never reported", id)
         common.check(count == (st.last[id] or 0), "killed producer %d: not a prefix", id)
         prefixes = prefixes + 1
      end
      values = values + count
   end

   -- timers: delivered + cancelled == armed; collectors got exactly the fired ones
   local armed, cancelled = 0, 0
   local expect = {}
   for _, m in ipairs(timer_reports) do
      armed, cancelled = armed + m.armed, cancelled + m.cancelled
      for c, p in pairs(m.per) do
         local e = expect[c] or { count = 0, sum = 0 }
         e.count, e.sum = e.count + p.count, (e.sum + p.sum) % MOD
         expect[c] = e
      end
   end
   for c = 1, ncollectors do
      smarm.send(collectors[c], { expect = (expect[c] or { count = 0 }).count })
   end
   local delivered = 0
   local self_delivered = armed - cancelled
   for _ = 1, ncollectors do
      local m = smarm.recv(30)
      common.check(m and m.collector, "a collector did not report")
      common.check(not m.failure, "%s", tostring(m.failure))
      local c
      for k = 1, ncollectors do
         if names[k] == m.collector then
            c = k
         end
      end
      local e = expect[c] or { count = 0, sum = 0 }
      common.check(m.count == e.count and m.sum == e.sum,
         "%s: %d timer messages (checksum %d), senders expect %d (%d)", m.collector, m.count,
         m.sum, e.count, e.sum)
      delivered = delivered + m.count
   end
   self_delivered = self_delivered - delivered

   common.wait_others(0)
   for c = 1, ncollectors do
      common.check(smarm.whereis(names[c]) == nil, "collector name %s still held", names[c])
   end
   common.check(smarm.recv(0) == nil, "a stray message for the root")
   return common.report("timers_channels", t0,
      "%d timers from %d actors: %d delivered (%d to self, %d to collectors by pid or name, "
         .. "checksums match) + %d cancelled == armed, none after its cancel or twice, sleeps "
         .. "never short; %d values over %d channels from %d producers in FIFO order, none "
         .. "lost or duplicated (checksums), %d killed producers left prefixes, %d closed "
         .. "their channel, %d rx handoffs, every rx ended closed, %d select timeouts; live=%d",
      armed, ntimer_actors, armed - cancelled, self_delivered, delivered, cancelled, values,
      nhubs * 2, #producers, prefixes, closes, handoffs, timeouts, common.others())
end

return common.main("timers_channels", run, ...)
