--- An NPC of examples/embed/game.c: started by the world's supervisor, it answers each
-- frame the game sends with its new position, moved by the game's own C function
-- (engine.step, preloaded by the host with smarm_preload).
local smarm = require "smarm"
local engine = require "engine"

local M = {}

function M.run(id)
   smarm.register("npc" .. id)
   local x, y = engine.spawn_point(id)
   local reply = { id = id }
   while true do
      local m = smarm.recv()
      if m.crash then
         error(("npc%d: told to crash"):format(id))
      end
      x, y = engine.step(x, y, m.dt, id)
      reply.frame, reply.x, reply.y = m.frame, x, y
      smarm.send(m.from, reply)
   end
end

return M
