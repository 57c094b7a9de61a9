-- messages: senders stream numbered messages to receivers (several senders per receiver),
-- with a sliding window of acknowledgements so mailboxes stay bounded. Each receiver checks
-- per-sender FIFO order (every sequence number exactly once, in order) and keeps a count and
-- an order-sensitive checksum per sender, which the root compares with the senders' own.
-- Usage: smarm-lua -S 2 tests/stress/messages.lua [small|large] [seed]

-- Sends n messages {sid, seq, value, self[, text]} to rx; waits for an ack every w messages
-- once 4 windows are outstanding; then reports its count and checksum to root.
local function sender(root, rx, sid, n, w)
   local smarm = require "smarm"
   local MOD = 2147483647 -- checksums: h = (h * 33 + v) % MOD stays exact in a double
   local me = smarm.self()
   local h, acked = 0, 0
   for seq = 1, n do
      local v = (seq * 2654435761 + sid) % 4294967296
      h = (h * 33 + v) % MOD
      local m = { sid, seq, v, me }
      if seq % 16 == 0 then
         m[5] = tostring(v)
      end
      assert(smarm.send(rx, m))
      if seq % w == 0 then
         while seq / w - acked > 4 do
            acked = assert(smarm.recv(60), "no ack")
         end
      end
   end
   smarm.send(root, { sender = sid, count = n, sum = h })
end

-- Receives k * n messages, checking each sender's sequence and text, acking every w.
local function receiver(root, rid, k, n, w)
   local smarm = require "smarm"
   local MOD = 2147483647
   local nexts, sums, counts, bad = {}, {}, {}, nil
   for _ = 1, k * n do
      local m = assert(smarm.recv(60), "receiver starved")
      local sid, seq, v = m[1], m[2], m[3]
      local want = nexts[sid] or 1
      if seq ~= want and not bad then
         bad = ("sender %d: got seq %d, want %d"):format(sid, seq, want)
      end
      if seq % 16 == 0 and m[5] ~= tostring(v) and not bad then
         bad = ("sender %d seq %d: text %s for %s"):format(sid, seq, tostring(m[5]), v)
      end
      nexts[sid] = seq + 1
      counts[sid] = (counts[sid] or 0) + 1
      sums[sid] = ((sums[sid] or 0) * 33 + v) % MOD
      if seq % w == 0 then
         smarm.send(m[4], seq / w)
      end
   end
   if smarm.recv(0) ~= nil and not bad then
      bad = "a message beyond the expected count"
   end
   smarm.send(root, { receiver = rid, counts = counts, sums = sums, bad = bad })
end

local smarm = require "smarm"
local common = require "common"

local function run(size, seed)
   local receivers = size == "large" and 250 or 25
   local per = 4 -- senders per receiver
   local n = 10000 -- messages per sender
   local w = 64
   math.randomseed(seed)

   local t0 = smarm.now()
   local me = smarm.self()
   local owner = {} -- sid -> receiver index
   local sid = 0
   for rid = 1, receivers do
      local rx = smarm.spawn(receiver, me, rid, per, n, w)
      for _ = 1, per do
         sid = sid + 1
         owner[sid] = rid
         smarm.spawn(sender, me, rx, sid, n, w)
      end
   end

   local sent, got = {}, {}
   for _ = 1, sid + receivers do
      local m = smarm.recv(600)
      common.check(m ~= nil, "timed out waiting for reports")
      if m.sender then
         sent[m.sender] = m
      else
         common.check(not m.bad, "receiver %d: %s", m.receiver, tostring(m.bad))
         got[m.receiver] = m
      end
   end
   for s = 1, sid do
      local r = got[owner[s]]
      common.check(r.counts[s] == n, "pair %d: %s of %d messages arrived", s, r.counts[s], n)
      common.check(r.sums[s] == sent[s].sum, "pair %d: checksum %s, sender's %s", s,
         r.sums[s], sent[s].sum)
   end
   common.wait_others(0)
   local dt = smarm.now() - t0
   return common.report("messages", t0,
      "%d messages over %d sender->receiver pairs (%d receivers x %d senders): per-sender FIFO "
         .. "held, none lost or duplicated, %d checksums match; %.0f msg/s", sid * n, sid,
      receivers, per, sid, sid * n / dt)
end

return common.main("messages", run, ...)
