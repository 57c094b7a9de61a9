-- chanpingpong: a round trip over a pair of channels against one over the two inboxes,
-- R rounds each, printed side by side.
-- Usage: smarm-lua chanpingpong.lua [R=1000000]   prints RESULT ns_per_round_trip=... (channels)

local rounds = math.floor(tonumber(arg[1]) or 1e6)

-- Channel echo: receives {tx = reply channel} first, then echoes until a negative n.
local function chan_ponger(parent)
   local smarm = require "smarm"
   local tx, rx = smarm.channel()
   smarm.send(parent, tx)
   local back = rx:recv()
   while true do
      local m = rx:recv()
      back:send(m)
      if m.n < 0 then
         return
      end
   end
end

-- Inbox echo, as in pingpong.lua.
local function inbox_ponger(parent)
   local smarm = require "smarm"
   while true do
      local m = smarm.recv()
      smarm.send(parent, m)
      if m.n < 0 then
         return
      end
   end
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now = smarm.now

local function chan_run()
   smarm.spawn(chan_ponger, smarm.self())
   local out = smarm.recv()
   local tx, rx = smarm.channel()
   out:send(tx)
   local t0 = now()
   for i = 1, rounds do
      out:send({ n = i })
      local m = rx:recv()
      if m.n ~= i then
         error("chanpingpong: got " .. tostring(m.n) .. ", expected " .. i)
      end
   end
   local t1 = now()
   out:send({ n = -1 })
   rx:recv()
   return (t1 - t0) * 1e9 / rounds
end

local function inbox_run()
   local pid = smarm.spawn(inbox_ponger, smarm.self())
   local send, recv = smarm.send, smarm.recv
   local t0 = now()
   for i = 1, rounds do
      send(pid, { n = i })
      local m = recv()
      if m.n ~= i then
         error("chanpingpong: got " .. tostring(m.n) .. ", expected " .. i)
      end
   end
   local t1 = now()
   send(pid, { n = -1 })
   recv()
   return (t1 - t0) * 1e9 / rounds
end

local inbox = inbox_run()
local chan = chan_run()
print(string.format("%-10s %12s", "", "ns/round trip"))
print(string.format("%-10s %12.1f", "channel", chan))
print(string.format("%-10s %12.1f", "inbox", inbox))
print(string.format("RESULT ns_per_round_trip=%.1f", chan))
