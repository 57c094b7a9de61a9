-- crash: short-lived workers that do a few random actions (message the stable actors or
-- other workers, drain their inbox, yield) and then end a random way: an error (a string, a
-- table, nil), smarm.exit with a reason, smarm.exit(), or returning, often with messages
-- still unread. Meanwhile stable actors keep exchanging messages with each other. Checks that
-- every send a worker saw succeed reached its stable actor, that the stable actors' own
-- traffic arrived in order, and that no worker is left; prints the crash reports to expect on
-- stderr (scripts/stress counts them).
-- New kinds of churn (kill, link, monitor, register, timers, channels) go in ACTIONS and
-- FATES inside `worker` below.
-- Usage: smarm-lua -S 2 tests/stress/crash.lua [small|large] [seed]

-- A worker: rounds of random actions, then a report to root, then its fate.
local function worker(root, seed, stable, peers)
   local smarm = require "smarm"
   math.randomseed(seed)
   local sent = {} -- stable index -> sends that returned true
   local peer_sends, dead = 0, 0
   local ACTIONS = {
      function() -- message a stable actor: a live one must get it
         local i = math.random(#stable)
         if smarm.send(stable[i], { from = "worker", pad = ("x"):rep(math.random(0, 100)) }) then
            sent[i] = (sent[i] or 0) + 1
         end
      end,
      function() -- message another worker, which may have ended already
         if #peers > 0 then
            local ok = smarm.send(peers[math.random(#peers)], { hello = seed })
            peer_sends = peer_sends + 1
            dead = dead + (ok and 0 or 1)
         end
      end,
      function() -- read some of the inbox
         for _ = 1, math.random(0, 3) do
            if smarm.recv(0) == nil then
               break
            end
         end
      end,
      function()
         smarm.yield()
      end,
   }
   local FATES = {
      { "error", function() error("worker " .. seed .. " fails on purpose") end },
      { "error", function() error({ code = seed }) end },
      { "error", function() error(nil) end },
      { "exit_reason", function() smarm.exit("shutdown " .. seed) end },
      { "exit", function() smarm.exit() end },
      { "return", function() end },
   }
   for _ = 1, math.random(0, 20) do
      ACTIONS[math.random(#ACTIONS)]()
   end
   local fate = FATES[math.random(#FATES)]
   smarm.send(root, { sent = sent, peer_sends = peer_sends, dead = dead, fate = fate[1] })
   fate[2]()
end

-- A stable actor: counts worker messages, and passes numbered tokens to the next stable
-- actor, checking that the tokens from its predecessor arrive in order.
local function stable_actor(root, index, count)
   local smarm = require "smarm"
   local next_pid
   local from_workers, token_out, token_in, bad = 0, 0, 0, nil
   while true do
      local m = smarm.recv()
      if m.from == "worker" then
         from_workers = from_workers + 1
         if next_pid and from_workers % 4 == 0 then
            token_out = token_out + 1
            smarm.send(next_pid, { token = token_out })
         end
      elseif m.token then
         token_in = token_in + 1
         if m.token ~= token_in and not bad then
            bad = ("stable %d: token %d, want %d"):format(index, m.token, token_in)
         end
      elseif m.ring then
         next_pid = m.ring[index % count + 1]
      elseif m.flush then -- every token this actor will pass on has been sent
         smarm.send(root, { flushed = index })
      elseif m.stop then
         smarm.send(root, { stable = index, from_workers = from_workers, token_out = token_out,
            token_in = token_in, bad = bad })
         return
      end
   end
end

local smarm = require "smarm"
local common = require "common"

local function run(size, seed)
   local total = size == "large" and 50000 or 5000
   local population = 200
   local nstable = 8
   math.randomseed(seed)

   local t0 = smarm.now()
   local me = smarm.self()
   local stable = {}
   for i = 1, nstable do
      stable[i] = smarm.spawn(stable_actor, me, i, nstable)
   end
   for i = 1, nstable do
      smarm.send(stable[i], { ring = stable })
   end

   local live = {} -- recent worker pids, handed to new workers as peers
   local spawned, reports = 0, 0
   local expected = {} -- stable index -> worker sends that succeeded
   local fates = {}
   local peer_sends, dead_sends = 0, 0
   local function spawn_one()
      spawned = spawned + 1
      local peers = {}
      for k = 1, math.min(#live, 5) do
         peers[k] = live[math.random(#live)]
      end
      local pid = smarm.spawn(worker, me, seed * 1000003 + spawned, stable, peers)
      live[(spawned - 1) % population + 1] = pid
   end

   for _ = 1, population do
      spawn_one()
   end
   while reports < total do
      local m = smarm.recv(60)
      common.check(m ~= nil, "no worker report for 60 s (%d of %d)", reports, total)
      reports = reports + 1
      for i, n in pairs(m.sent) do
         expected[i] = (expected[i] or 0) + n
      end
      fates[m.fate] = (fates[m.fate] or 0) + 1
      peer_sends, dead_sends = peer_sends + m.peer_sends, dead_sends + m.dead
      if spawned < total then
         spawn_one()
      end
   end
   common.wait_others(nstable)

   local delivered, tokens = 0, 0
   -- Two phases: once all have flushed, no token is in flight, so each stop comes after
   -- every token for its actor (a send queues the message before it returns).
   for i = 1, nstable do
      smarm.send(stable[i], { flush = true })
   end
   for _ = 1, nstable do
      local m = smarm.recv(30)
      common.check(m ~= nil and m.flushed, "a stable actor did not flush")
   end
   for i = 1, nstable do
      smarm.send(stable[i], { stop = true })
   end
   local stats = {}
   for _ = 1, nstable do
      local m = smarm.recv(30)
      common.check(m ~= nil and m.stable, "a stable actor did not report")
      common.check(not m.bad, "%s", tostring(m.bad))
      stats[m.stable] = m
   end
   for i = 1, nstable do
      local m = stats[i]
      common.check(m.from_workers == (expected[i] or 0),
         "stable %d got %d worker messages, workers sent %d", i, m.from_workers, expected[i] or 0)
      local pred = stats[(i - 2) % nstable + 1]
      common.check(m.token_in == pred.token_out, "stable %d got %d tokens, %d were sent", i,
         m.token_in, pred.token_out)
      delivered, tokens = delivered + m.from_workers, tokens + m.token_in
   end
   common.wait_others(0)
   return common.report("crash", t0,
      "%d workers ended (error %d, exit with a reason %d, exit() %d, return %d) beside %d "
         .. "stable actors; %d worker sends all delivered, %d tokens in order, %d of %d sends "
         .. "to workers found them dead; live=%d; expected_crashes=%d",
      total, fates.error or 0, fates.exit_reason or 0, fates.exit or 0, fates["return"] or 0,
      nstable, delivered, tokens, dead_sends, peer_sends, common.others(), fates.error or 0)
end

return common.main("crash", run, ...)
