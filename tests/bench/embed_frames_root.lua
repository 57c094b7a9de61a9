--- The exchange of examples/embed/game.c without a host thread, for comparison: a root
-- actor sends N actors a frame message each (by pid) and gathers their replies, at 60 Hz.
-- Usage: smarm-lua tests/bench/embed_frames_root.lua N FRAMES (run by embed_frames.sh)
local s = require "smarm"
local n, frames = tonumber(arg[1]), tonumber(arg[2])
local pids = {}
for i = 1, n do
   pids[i] = s.spawn(function(id)
      local smarm = require "smarm"
      local reply = { id = id }
      while true do
         local m = smarm.recv()
         reply.frame, reply.x, reply.y = m.frame, id * m.dt, id
         smarm.send(m.from, reply)
      end
   end, i)
end
local msg = { from = s.self() }
local total = 0
for f = 1, frames do
   msg.frame, msg.dt = f, 1 / 60
   local t0 = s.now()
   for i = 1, n do s.send(pids[i], msg) end
   local got = 0
   while got < n do
      local r = s.recv(1)
      if r.frame == f then got = got + 1 end
   end
   total = total + (s.now() - t0)
   local left = 1 / 60 - (s.now() - t0)
   s.sleep(left > 0 and left or 0)
end
print(("%d NPCs: root actor instead of the host: %.1f us per frame"):format(n,
   total / frames * 1e6))
for i = 1, n do s.kill(pids[i]) end
