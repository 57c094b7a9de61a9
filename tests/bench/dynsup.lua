-- dynsup: a simple_one_for_one supervisor grown to N children (N = 100000), each an
-- actor that reports it is up and waits (dynsup_worker.lua). Times start_child over the
-- first and the last 1,000 children (the same if a start costs O(1)), count_children at
-- N children, and the restart of K children killed at N (kill, down notice, restart with
-- the same args, up to the restarted child's report).
-- Usage: smarm-lua dynsup.lua [N=100000] [K=1000]
--   prints RESULT us_start_first_1k=... us_start_last_1k=... us_per_start=...
--   us_count_children=... us_per_restart=...

local n = math.floor(tonumber(arg[1]) or 100000)
local k = math.min(n, math.floor(tonumber(arg[2]) or 1000))

local smarm = require "smarm"
local supervisor = require "smarm.supervisor"

local sup = assert(supervisor.start_link({
   strategy = "simple_one_for_one",
   intensity = k + 1,
   period = 3600,
   children = { { id = "w", start = { "dynsup_worker", "run", smarm.self() },
                  shutdown = "brutal_kill" } },
}))

local pids = {}
local first, last
local t0 = smarm.now()
for i = 1, n do
   if i == n - 999 then last = smarm.now() end
   pids[i] = assert(supervisor.start_child(sup))
   if i == math.min(1000, n) then first = smarm.now() - t0 end
end
local t1 = smarm.now()
last = t1 - (last or t0)
for _ = 1, n do assert(smarm.recv(60), "dynsup: a child did not report") end

local calls = 1000
local c0 = smarm.now()
for _ = 1, calls do
   assert(supervisor.count_children(sup).active == n)
end
local c1 = smarm.now()

-- kill K children, then wait until each restarted child has reported
local r0 = smarm.now()
for i = 1, k do smarm.kill(pids[i]) end
for _ = 1, k do assert(smarm.recv(60), "dynsup: a child was not restarted") end
local r1 = smarm.now()
assert(supervisor.count_children(sup).active == n)

print(string.format("RESULT us_start_first_1k=%.3f us_start_last_1k=%.3f us_per_start=%.3f "
   .. "us_count_children=%.3f us_per_restart=%.3f", first * 1e6 / math.min(1000, n),
   last * 1e6 / math.min(1000, n), (t1 - t0) * 1e6 / n, (c1 - c0) * 1e6 / calls,
   (r1 - r0) * 1e6 / k))
smarm.unlink(sup)
smarm.kill(sup)
