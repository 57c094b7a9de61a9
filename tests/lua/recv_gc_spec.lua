-- Receiving while __gc finalizers raise: no finalizer runs while a received message is
-- decoded or a wait finishes, so every message arrives exactly once and in order and no
-- receive ends the actor; finalizer errors surface in the receiver's own code (here mostly
-- in litter()), or from a receive before it takes anything.

-- The receiver: makes garbage whose finalizers raise, and takes n messages {seq = i, pad}
-- through `how` ("inbox": smarm.recv, "channel": rx:recv, "select": smarm.select's inbox
-- arm), each receive in a pcall. In "lockstep" it
-- acknowledges each message (so its next receive waits, and resumes in a continuation);
-- otherwise every message is queued before it starts. Reports the seqs it got.
local function receiver(parent, n, how, lockstep, rx, go)
   local s = require "smarm"
   local find = string.find -- looked up now: opening the string library allocates
   local got = {}
   for i = 1, n do got[i] = 0 end -- so recording a seq allocates nothing
   local count, other = 0, 0 -- errors from a receive that no finalizer raised
   local fin = require "support.finalizers"
   local litter, take = fin.litter, fin.taker(how, rx, 10)
   local function ack(i) s.send(parent, i) end
   local function report(c, e) s.send(parent, { count = c, other = e, got = got }) end
   assert(go:recv(10) == "go")
   while count < n do
      pcall(litter, 20)
      local ok, m = pcall(take)
      if ok then
         if m == nil then break end -- timed out: a message was lost
         count = count + 1
         got[count] = m.seq
         if lockstep then
            while not pcall(ack, count) do end
         end
      elseif not (type(m) == "string" and find(m, "finalizer raised", 1, true)) then
         other = other + 1
      end
   end
   while not pcall(report, count, other) do end
end

-- Waits in receives that time out (each resumes in a continuation that pushes nil,
-- "timeout") while finalizers raise; reports how many returned "timeout", raised a
-- finalizer's error (before waiting), or did anything else.
local function timing_out(parent, how, rx)
   local s = require "smarm"
   local find = string.find -- looked up now: opening the string library allocates
   local fin = require "support.finalizers"
   local litter, take = fin.litter, fin.taker(how, rx, 0.001)
   local timeouts, raised, other = 0, 0, 0
   local function report()
      s.send(parent, { timeouts = timeouts, raised = raised, other = other })
   end
   for _ = 1, 100 do
      pcall(litter, 20)
      local ok, v, err = pcall(take)
      if ok and v == nil and err == "timeout" then
         timeouts = timeouts + 1
      elseif not ok and type(v) == "string" and find(v, "finalizer raised", 1, true) then
         raised = raised + 1
      else
         other = other + 1
      end
   end
   while not pcall(report) do end
end

-- Leaves many finalizers that raise, with a GC step due at every allocation, then fails:
-- the crash report is written on its main state, where a finalizer's error had no pcall.
local function litter_and_fail()
   collectgarbage("setpause", 0)
   require("support.finalizers").litter(2000)
   error("boom")
end

-- Allocates nothing but the n messages it decodes (with the collector held), then reports
-- its heap in KB.
local function only_receives(parent, n, how, rx)
   local s = require "smarm"
   local take = require("support.finalizers").taker(how, rx, 10)
   for _ = 1, n do
      assert(take(), "a message is missing")
   end
   s.send(parent, collectgarbage("count"))
end

local smarm = require "smarm" -- below the bodies, so none can capture it

local N = 1000

local function run(how, lockstep)
   local tx, rx = smarm.channel()
   local gtx, grx = smarm.channel()
   local pid, mon = smarm.spawn_monitor(receiver, smarm.self(), N, how, lockstep, rx, grx)
   local pad = {}
   for i = 1, 20 do pad[i] = ("p"):rep(20) .. i end
   local function send(i)
      local m = { seq = i, pad = pad }
      if how ~= "channel" then -- select takes it from its inbox arm
         assert(smarm.send(pid, m))
      else
         assert(tx:send(m))
      end
   end
   if not lockstep then
      for i = 1, N do send(i) end
   end
   gtx:send("go")
   local r
   for i = 1, N + 1 do
      if lockstep and i <= N then send(i) end
      r = smarm.recv(30)
      assert(r ~= nil, how .. ": the receiver went silent")
      if type(r) == "table" then break end
      assert.are.equal(i, r, how .. ": acknowledgement")
   end
   assert.are.equal(N, r.count, how .. ": messages received")
   for i = 1, N do
      if r.got[i] ~= i then
         error(("%s: message %d arrived as %s"):format(how, i, tostring(r.got[i])))
      end
   end
   assert.are.equal(0, r.other, how .. ": a receive raised another error than a finalizer's")
   assert.are.equal("normal", assert(mon:recv(10), "no down notice").reason)
end

describe("receiving while __gc finalizers raise", function()
   for _, how in ipairs({ "inbox", "channel", "select" }) do
      it("times out of a waiting receive without ending the actor (" .. how .. ")",
         function()
            local _, rx = smarm.channel()
            local _, mon = smarm.spawn_monitor(timing_out, smarm.self(), how, rx)
            local r = assert(smarm.recv(30), "the actor went silent")
            assert.are.equal(100, r.timeouts + r.raised)
            assert.is_true(r.timeouts > 0)
            assert.are.equal(0, r.other)
            assert.are.equal("normal", assert(mon:recv(10), "no down notice").reason)
         end)
      it("keeps every queued message, in order (" .. how .. ")", function()
         run(how, false)
      end)
      it("keeps every message a waiting receive takes, in order (" .. how .. ")", function()
         run(how, true)
      end)
   end

   it("reports an actor's crash while its finalizers raise, and carries on", function()
      for _ = 1, 20 do
         local _, mon = smarm.spawn_monitor(litter_and_fail)
         assert.are.equal("error", assert(mon:recv(10), "no down notice").reason)
      end
   end)

   for _, how in ipairs({ "inbox", "channel", "select" }) do
      it("keeps collecting in a receiver that allocates only what it receives (" .. how .. ")",
         function()
            local tx, rx = smarm.channel()
            local n = 100000
            local pid = smarm.spawn(only_receives, smarm.self(), n, how, rx)
            for i = 1, n do
               local m = { i, "message " .. i }
               if how == "channel" then assert(tx:send(m)) else assert(smarm.send(pid, m)) end
            end
            local kb = assert(smarm.recv(60), "no report")
            -- about 10 MB when its collector never ran
            assert.is_true(kb < 1024, ("%d KB"):format(kb))
         end)
   end
end)
