--- The root actor of examples/embed/game.c: a supervisor of N NPCs (one_for_one: a
-- crashed NPC is restarted alone). smarm_stop shuts it down politely, children last
-- started first.
local supervisor = require "smarm.supervisor"

local n = math.floor(tonumber(arg[1]) or 10)
local children = {}
for i = 1, n do
   children[i] = { id = "npc" .. i, start = { "npc", "run", i }, shutdown = 1 }
end
supervisor.run({ strategy = "one_for_one", intensity = 10, period = 1, children = children })
