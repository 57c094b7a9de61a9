-- supervision: a supervisor keeps two workers running — a steady ticker and a
-- flaky worker that crashes on every third job and is restarted each time. The
-- root actor watches a few restarts, then shuts the tree down politely (each child
-- in reverse start order, with its grace) and ends.
-- Usage: smarm-lua examples/supervision.lua [restarts=3] [interval=0.02]
--   (interval: seconds between the flaky worker's jobs; it crashes every third job)
-- An application whose root is the supervisor would instead end its script with
--   require("smarm.supervisor").run(spec)
local smarm = require "smarm"
local supervisor = require "smarm.supervisor"

local restarts = math.floor(tonumber(arg[1]) or 3)
local interval = tonumber(arg[2]) or 0.02
smarm.register("watcher")

local sup = assert(supervisor.start_link({
   strategy = "one_for_one",
   intensity = 5, -- more than 5 restarts within 10 s would stop the whole tree
   period = 10,
   children = {
      { id = "ticker", start = { "lib.supervision_worker", "ticker", "ticker", 0.05 } },
      { id = "flaky", start = { "lib.supervision_worker", "flaky", "flaky", interval },
        restart = "permanent", shutdown = 1 },
   },
}))

local seen, ticks = -1, 0 -- the first start is not a restart
while seen < restarts do
   local m = assert(smarm.recv(5 + 3 * interval), "supervision: no news from the workers")
   if m.tick then
      ticks = ticks + 1
   elseif m.started then
      seen = seen + 1
      if seen > 0 then
         print(("restart %d: %s is back as %s"):format(seen, m.started, smarm.pid_tostring(m.pid)))
      end
   end
end

print(("the ticker, undisturbed, ticked %s meanwhile"):format(ticks > 0 and "on" or "not"))
for _, c in ipairs(supervisor.which_children(sup)) do
   print(("child %-6s %s"):format(c.id, c.pid and smarm.pid_tostring(c.pid) or "-"))
end
local mon = smarm.monitor(sup)
smarm.shutdown(sup)
print("supervisor stopped:", assert(mon:recv(5)).reason)
