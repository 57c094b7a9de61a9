--- Runs in the game's host state (examples/embed/game.c): the per-frame exchange with
-- the NPCs. Loaded once; the host calls the function it returns every frame.
local smarm = require "smarm"
local n = ...

local names = {}
for i = 1, n do
   names[i] = "npc" .. i
end
local msg = { from = smarm.self() }
local crash = { crash = true }

-- every NPC is up (registered) before the first frame
local t0 = smarm.now()
for i = 1, n do
   while not smarm.whereis(names[i]) do
      assert(smarm.now() - t0 < 30, "the NPCs did not start")
      smarm.sleep(0.005)
   end
end

--- One frame: a message to every NPC, then their replies until all came or budget
-- seconds are up. Replies of earlier frames are dropped. Returns sent, replies.
return function(frame, dt, budget, crash_id)
   msg.frame, msg.dt = frame, dt
   local sent = 0
   for i = 1, n do
      if i == crash_id then
         smarm.send(names[i], crash)
      elseif smarm.send(names[i], msg) then -- nil, "unresolved" while one restarts
         sent = sent + 1
      end
   end
   local got = 0
   local deadline = smarm.now() + budget
   while got < sent do
      local left = deadline - smarm.now()
      local r = smarm.recv(left > 0 and left or 0)
      if not r then
         break
      end
      if r.frame == frame then
         got = got + 1
      end
   end
   return sent, got
end
